//! Locks that recover from poisoning. What the service's locks guard is plain data kept
//! consistent between statements, so a panic on another thread (which a run task's
//! guard reports) must not make every later use of the lock panic too.

use std::sync::{
    Condvar, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard,
};

/// [`Mutex::lock`] that takes the guard of a poisoned mutex.
pub trait MutexExt<T: ?Sized> {
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> MutexExt<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// [`RwLock::read`] and [`RwLock::write`] that take the guard of a poisoned lock.
pub trait RwLockExt<T: ?Sized> {
    fn reading(&self) -> RwLockReadGuard<'_, T>;
    fn writing(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T: ?Sized> RwLockExt<T> for RwLock<T> {
    fn reading(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn writing(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// [`Condvar::wait`] that takes the guard back from a poisoned mutex.
pub trait CondvarExt {
    fn waited<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T>;
}

impl CondvarExt for Condvar {
    fn waited<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        self.wait(guard).unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_still_gives_its_value() {
        let mutex = std::sync::Arc::new(Mutex::new(1));
        let rw = std::sync::Arc::new(RwLock::new(2));
        let (m, r) = (mutex.clone(), rw.clone());
        let _ = std::thread::spawn(move || {
            let _m = m.lock();
            let _r = r.write();
            panic!("poisons both");
        })
        .join();
        assert!(mutex.is_poisoned() && rw.is_poisoned());
        assert_eq!(*mutex.locked(), 1);
        assert_eq!(*rw.reading(), 2);
        *rw.writing() = 3;
        assert_eq!(*rw.reading(), 3);
    }
}
