//! runner
pub struct RunOptions; pub struct RunSummary; pub struct Runner; pub struct RunnerError;
