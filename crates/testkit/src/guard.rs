//! Runs a call under `catch_unwind` with the panic message captured instead
//! of printed, so a sweep of many inputs reports a panic as one failure.

use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    static QUIET: Cell<bool> = const { Cell::new(false) };
    static LAST_PANIC: RefCell<String> = const { RefCell::new(String::new()) };
}

/// What a guarded call did.
#[derive(Debug)]
pub enum Outcome {
    Ok,
    Err(&'static str),
    Panic(String),
}

impl Outcome {
    pub fn describe(&self) -> String {
        match self {
            Outcome::Ok => "Ok".into(),
            Outcome::Err(c) => format!("Err({c})"),
            Outcome::Panic(m) => format!("PANIC: {m}"),
        }
    }

    pub fn code(&self) -> Option<&'static str> {
        match self {
            Outcome::Err(c) => Some(c),
            _ => None,
        }
    }
}

/// Installs (once per process) a panic hook that records the message of a
/// panic inside [`guarded`] and prints every other panic as usual.
fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if QUIET.with(Cell::get) {
                LAST_PANIC.with(|p| *p.borrow_mut() = info.to_string());
            } else {
                default(info);
            }
        }));
    });
}

/// Runs `f`; a panic becomes [`Outcome::Panic`] with its message and location.
pub fn guarded(f: impl FnOnce() -> Result<(), &'static str>) -> Outcome {
    install_panic_hook();
    QUIET.with(|q| q.set(true));
    let r = catch_unwind(AssertUnwindSafe(f));
    QUIET.with(|q| q.set(false));
    match r {
        Ok(Ok(())) => Outcome::Ok,
        Ok(Err(c)) => Outcome::Err(c),
        Err(_) => Outcome::Panic(LAST_PANIC.with(|p| std::mem::take(&mut *p.borrow_mut()))),
    }
}
