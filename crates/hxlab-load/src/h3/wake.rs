//! The per-slot waker scheduler: each request slot (and the control streams) has its own
//! waker, made once per connection, which marks the slot ready and wakes the session; a
//! wake-up then polls only the slots marked.

use super::*;

/// Which request slots (and the control task, at index `depth`) have something to say, and
/// the session task to wake when one does.
pub(super) struct ReadySet {
    pub(super) flags: Box<[AtomicBool]>,
    /// Some flag was set since the session last looked.
    pub(super) any: AtomicBool,
    pub(super) session: AtomicWaker,
}

impl ReadySet {
    #[inline]
    pub(super) fn take(&self, i: usize) -> bool {
        self.flags[i].load(Ordering::Relaxed) && self.flags[i].swap(false, Ordering::AcqRel)
    }

    pub(super) fn mark(&self, i: usize) {
        self.flags[i].store(true, Ordering::Release);
        self.any.store(true, Ordering::Release);
    }

    /// Marks slot `i` for the pass the session is in (it polls the slots after this).
    pub(super) fn mark_for_this_pass(&self, i: usize) {
        self.flags[i].store(true, Ordering::Release);
    }

    /// Starts a pass: whatever is marked from now on wakes the next one.
    pub(super) fn begin_pass(&self) {
        self.any.store(false, Ordering::Release);
    }

    /// Something was marked since the last pass began.
    pub(super) fn any(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }
}

/// The waker of one slot: quinn keeps it while the slot's streams are blocked.
pub(super) struct SlotWaker {
    pub(super) set: Arc<ReadySet>,
    pub(super) index: usize,
}

impl Wake for SlotWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.set.mark(self.index);
        self.set.session.wake();
    }
}
