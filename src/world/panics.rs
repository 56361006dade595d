//! Remembers the last panic message on this thread, so a run stopped by a
//! panicking host can say why (the panic that reaches the step loop is
//! tokio's generic "a spawned task panicked").

use std::cell::RefCell;
use std::sync::Once;

thread_local! {
    static LAST: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs the recording hook once per process; it chains to the previous hook.
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let msg = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic".into());
            let at = info.location().map(|l| format!(" ({}:{})", l.file(), l.line())).unwrap_or_default();
            LAST.with(|l| {
                let mut l = l.borrow_mut();
                // Keep the first (root) panic, not tokio's re-raise of it.
                if l.is_none() {
                    *l = Some(format!("{msg}{at}"));
                }
            });
            previous(info);
        }));
    });
    LAST.with(|l| *l.borrow_mut() = None);
}

/// The first panic recorded on this thread since `install`.
pub fn last() -> Option<String> {
    LAST.with(|l| l.borrow().clone())
}
