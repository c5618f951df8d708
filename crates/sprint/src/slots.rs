//! [`Slots`]: a counting lock for futures, without a runtime.

use std::sync::{Mutex, PoisonError};
use std::task::{Poll, Waker};

/// A counting lock for the futures of one coordinator, which brings no runtime of its own: a
/// [`Slot`] taken is given back when dropped, waking whoever waits. The run's round slots
/// (`--jobs` of them, [`TaskHost::round_slots`](crate::TaskHost::round_slots)) are one; the
/// executors' one-at-a-time git is another, of one slot.
#[derive(Debug)]
pub struct Slots {
    /// Free slots, and who waits for one.
    state: Mutex<(usize, Vec<Waker>)>,
}

impl Slots {
    /// `count` free slots.
    pub fn new(count: usize) -> Self {
        Self {
            state: Mutex::new((count, Vec::new())),
        }
    }

    /// How many are free now.
    pub fn free(&self) -> usize {
        self.lock().0
    }

    /// A slot now, if one is free.
    pub fn try_take(&self) -> Option<Slot<'_>> {
        let mut state = self.lock();
        if state.0 == 0 {
            return None;
        }
        state.0 -= 1;
        Some(Slot { slots: self })
    }

    /// A slot, once one is free.
    pub async fn take(&self) -> Slot<'_> {
        std::future::poll_fn(|cx| {
            let mut state = self.lock();
            if state.0 == 0 {
                state.1.push(cx.waker().clone());
                Poll::Pending
            } else {
                state.0 -= 1;
                Poll::Ready(())
            }
        })
        .await;
        Slot { slots: self }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (usize, Vec<Waker>)> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One of the run's round slots, given back when dropped.
#[derive(Debug)]
pub struct Slot<'s> {
    slots: &'s Slots,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut state = self.slots.lock();
        state.0 += 1;
        for waker in state.1.drain(..) {
            waker.wake();
        }
    }
}
