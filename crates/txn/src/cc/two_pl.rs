//! Strict two-phase locking over the [`LockManager`]: shared locks before reads, exclusive
//! locks before writes, all held until `finish` (after commit or abort).
//!
//! | call             | record granularity         | page granularity (`page_level`)       |
//! |------------------|----------------------------|---------------------------------------|
//! | `read(r)`        | `Record{table, key}` in S  | `Page{table, page}` in S (record S if the page is unknown) |
//! | `write(r)`       | `Record{table, key}` in X  | `Page{table, page}` in X (likewise)   |
//! | `scan(t, Read)`  | table S                    | table S                               |
//! | `scan(t, Write)` | table SIX (writes then take record/page X) | same                  |
//! | `finish`         | `release_all`              | `release_all`                         |
//!
//! Intention locks on database and table come from the lock manager's hierarchy; a scan's
//! table lock also covers later reads of the table, which then cost no request.

use super::{AccessMode, CcError, ConcurrencyControl, RecordRef};
use crate::lock::{LockConfig, LockManager, LockMode, TxnLocks, WHOLE_GAP};
use crate::TxnId;

/// The strict 2PL scheme.
pub struct TwoPhaseLocking {
    locks: LockManager,
}

impl TwoPhaseLocking {
    pub fn new(config: LockConfig) -> Self {
        TwoPhaseLocking {
            locks: LockManager::new(config),
        }
    }

    /// The lock manager (for statistics and invariant checks).
    pub fn lock_manager(&self) -> &LockManager {
        &self.locks
    }

    /// Whether pages rather than records are locked.
    pub fn page_level(&self) -> bool {
        self.locks.config().page_level
    }

    #[inline]
    fn lock(&self, t: &mut TxnLocks, r: RecordRef, mode: LockMode) -> Result<(), CcError> {
        match r.page {
            Some(page) if self.page_level() => self.locks.lock_page(t, r.table, page, mode)?,
            _ => self.locks.lock_record(t, r.table, r.key, mode, WHOLE_GAP)?,
        }
        Ok(())
    }
}

impl ConcurrencyControl for TwoPhaseLocking {
    type Txn = TxnLocks;

    fn name(&self) -> &'static str {
        if self.page_level() {
            "2pl-page"
        } else {
            "2pl-record"
        }
    }

    fn begin(&self, txn: TxnId) -> TxnLocks {
        self.locks.begin(txn)
    }

    fn restart(&self, t: &mut TxnLocks, txn: TxnId) {
        t.reset(txn);
    }

    #[inline]
    fn read(&self, t: &mut TxnLocks, record: RecordRef) -> Result<(), CcError> {
        self.lock(t, record, LockMode::S)
    }

    #[inline]
    fn write(&self, t: &mut TxnLocks, record: RecordRef) -> Result<(), CcError> {
        self.lock(t, record, LockMode::X)
    }

    fn scan(&self, t: &mut TxnLocks, table: u32, access: AccessMode) -> Result<(), CcError> {
        let mode = match access {
            AccessMode::Read => LockMode::S,
            AccessMode::Write => LockMode::SIX,
        };
        self.locks.lock_table(t, table, mode)?;
        Ok(())
    }

    fn validate(&self, _t: &mut TxnLocks) -> Result<(), CcError> {
        Ok(())
    }

    fn finish(&self, t: &mut TxnLocks) {
        self.locks.release_all(t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock::LockName;
    use std::time::Duration;

    fn config(page_level: bool) -> LockConfig {
        LockConfig {
            page_level,
            wait_timeout: Duration::from_millis(100),
            ..LockConfig::default()
        }
    }

    /// Bank transfers with a deliberately racy read-modify-write of the balances: only the
    /// locks keep money from being lost. Auditors read every account under S locks (and
    /// escalate) and must always see the same total.
    fn bank(page_level: bool) {
        use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
        use std::sync::Arc;

        const ACCOUNTS: u64 = 16;
        const START: i64 = 1000;
        let cc = Arc::new(TwoPhaseLocking::new(LockConfig {
            page_level,
            escalation_threshold: 8,
            wait_timeout: Duration::from_secs(5),
            ..LockConfig::default()
        }));
        let balances: Arc<Vec<AtomicI64>> =
            Arc::new((0..ACCOUNTS).map(|_| AtomicI64::new(START)).collect());
        let next_txn = Arc::new(AtomicU64::new(1));
        // Four accounts per page in page-level mode.
        let record = |k: u64| RecordRef::on_page(1, k, k / 4);
        let threads: Vec<_> = (0..4u64)
            .map(|thread_no| {
                let (cc, balances, next_txn) = (cc.clone(), balances.clone(), next_txn.clone());
                std::thread::spawn(move || {
                    let mut t = cc.begin(TxnId(0));
                    let mut retries = 0;
                    for i in 0..200u64 {
                        let auditor = thread_no == 0 && i % 10 == 0;
                        let (from, to) = ((i * 7 + thread_no) % ACCOUNTS, (i * 3 + 1) % ACCOUNTS);
                        loop {
                            cc.restart(&mut t, TxnId(next_txn.fetch_add(1, Ordering::Relaxed)));
                            let r: Result<(), CcError> = (|| {
                                if auditor {
                                    let mut total = 0;
                                    for k in 0..ACCOUNTS {
                                        cc.read(&mut t, record(k))?;
                                        total += balances[k as usize].load(Ordering::Relaxed);
                                    }
                                    assert_eq!(total, START * ACCOUNTS as i64);
                                    return Ok(());
                                }
                                if from == to {
                                    return Ok(());
                                }
                                cc.read(&mut t, record(from))?;
                                let a = balances[from as usize].load(Ordering::Relaxed);
                                cc.write(&mut t, record(from))?;
                                cc.write(&mut t, record(to))?;
                                let b = balances[to as usize].load(Ordering::Relaxed);
                                std::thread::yield_now();
                                balances[from as usize].store(a - 5, Ordering::Relaxed);
                                balances[to as usize].store(b + 5, Ordering::Relaxed);
                                Ok(())
                            })();
                            match r {
                                Ok(()) => {
                                    cc.validate(&mut t).unwrap();
                                    cc.finish(&mut t);
                                    break;
                                }
                                Err(e) => {
                                    // Nothing was written before the failing lock: no undo.
                                    assert!(e.is_retryable());
                                    cc.finish(&mut t);
                                    retries += 1;
                                }
                            }
                        }
                    }
                    retries
                })
            })
            .collect();
        let retries: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        let total: i64 = balances.iter().map(|b| b.load(Ordering::Relaxed)).sum();
        assert_eq!(total, START * ACCOUNTS as i64, "money conserved");
        let m = cc.lock_manager();
        m.check_invariants();
        assert_eq!(m.lock_name_count(), 0);
        assert_eq!(m.stats().deadlocks + m.stats().timeouts, retries);
        assert_eq!(m.stats().timeouts, 0);
    }

    #[test]
    fn bank_transfers_conserve_money_with_record_locks() {
        bank(false);
    }

    #[test]
    fn bank_transfers_conserve_money_with_page_locks() {
        bank(true);
    }

    #[test]
    fn record_granularity_locks_records() {
        let cc = TwoPhaseLocking::new(config(false));
        let mut t = cc.begin(TxnId(1));
        cc.read(&mut t, RecordRef::on_page(2, 10, 5)).unwrap();
        cc.write(&mut t, RecordRef::new(2, 11)).unwrap();
        assert_eq!(
            t.mode_of(LockName::Record { table: 2, key: 10 }),
            Some(LockMode::S)
        );
        assert_eq!(
            t.mode_of(LockName::Record { table: 2, key: 11 }),
            Some(LockMode::X)
        );
        assert_eq!(t.mode_of(LockName::Table(2)), Some(LockMode::IX));
        assert_eq!(cc.name(), "2pl-record");
        assert!(cc.validate(&mut t).is_ok());
        cc.finish(&mut t);
        assert!(t.is_empty());
        assert_eq!(cc.lock_manager().lock_name_count(), 0);
    }

    #[test]
    fn page_granularity_locks_pages_and_conflicts_on_them() {
        let cc = TwoPhaseLocking::new(config(true));
        let mut a = cc.begin(TxnId(1));
        let mut b = cc.begin(TxnId(2));
        cc.write(&mut a, RecordRef::on_page(1, 100, 7)).unwrap();
        assert_eq!(
            a.mode_of(LockName::Page { table: 1, page: 7 }),
            Some(LockMode::X)
        );
        // Another record on the same page conflicts (page granularity); one on another page does not.
        let err = cc.read(&mut b, RecordRef::on_page(1, 200, 7)).unwrap_err();
        assert!(err.is_retryable());
        cc.read(&mut b, RecordRef::on_page(1, 300, 8)).unwrap();
        cc.finish(&mut a);
        cc.finish(&mut b);
        cc.lock_manager().check_invariants();
    }

    #[test]
    fn scans_lock_the_table_and_cover_reads() {
        let cc = TwoPhaseLocking::new(config(false));
        let mut a = cc.begin(TxnId(1));
        cc.scan(&mut a, 3, AccessMode::Read).unwrap();
        let before = a.stats().requests;
        cc.read(&mut a, RecordRef::new(3, 1)).unwrap();
        assert_eq!(
            a.stats().requests,
            before,
            "a read under a table S costs no request"
        );
        let mut b = cc.begin(TxnId(2));
        assert!(
            cc.write(&mut b, RecordRef::new(3, 9)).is_err(),
            "IX conflicts with S"
        );
        cc.finish(&mut b);
        cc.scan(&mut a, 3, AccessMode::Write).unwrap();
        assert_eq!(a.mode_of(LockName::Table(3)), Some(LockMode::SIX));
        cc.write(&mut a, RecordRef::new(3, 1)).unwrap();
        assert_eq!(
            a.mode_of(LockName::Record { table: 3, key: 1 }),
            Some(LockMode::X)
        );
        cc.finish(&mut a);
        cc.restart(&mut a, TxnId(5));
        assert_eq!(a.txn(), TxnId(5));
    }
}
