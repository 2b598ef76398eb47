//! One page load in the engine the config names: the entry points every caller uses, above
//! the Chromium driver (load.rs) and the Firefox driver (firefox/).

use crate::{BrowserError, Engine, PageConfig, PageRun};

/// Loads one page, blocking the calling thread. Safe to call from inside a tokio runtime (it
/// then runs on a helper thread with its own runtime). The browser is gone and its profile
/// removed when this returns, whatever the outcome.
pub fn load_page(cfg: PageConfig) -> Result<PageRun, BrowserError> {
    let work = move || -> Result<PageRun, BrowserError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| BrowserError::Launch(format!("tokio runtime: {e}")))?;
        rt.block_on(load_page_async(&cfg))
    };
    if tokio::runtime::Handle::try_current().is_ok() {
        std::thread::spawn(work)
            .join()
            .map_err(|_| BrowserError::Launch("page-load thread panicked".into()))?
    } else {
        work()
    }
}

/// Loads one page within `cfg.timeout`. Dropping the future kills the browser too.
pub async fn load_page_async(cfg: &PageConfig) -> Result<PageRun, BrowserError> {
    match cfg.engine {
        Engine::Chromium => crate::load::load_chromium(cfg).await,
        Engine::Firefox => crate::firefox::load(cfg).await,
    }
}
