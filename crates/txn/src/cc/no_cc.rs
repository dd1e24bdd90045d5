//! `locking=off`: no concurrency control. Every call is an empty inline function, so an
//! engine monomorphised over this scheme runs no lock-manager code at all. Correct only
//! when transactions do not run concurrently (one thread, or partitions with one thread
//! each).

use super::{AccessMode, CcError, ConcurrencyControl, RecordRef};
use crate::TxnId;

/// The scheme that does nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoConcurrencyControl;

impl ConcurrencyControl for NoConcurrencyControl {
    type Txn = TxnId;

    fn name(&self) -> &'static str {
        "none"
    }

    #[inline(always)]
    fn begin(&self, txn: TxnId) -> TxnId {
        txn
    }

    #[inline(always)]
    fn restart(&self, t: &mut TxnId, txn: TxnId) {
        *t = txn;
    }

    #[inline(always)]
    fn read(&self, _t: &mut TxnId, _record: RecordRef) -> Result<(), CcError> {
        Ok(())
    }

    #[inline(always)]
    fn write(&self, _t: &mut TxnId, _record: RecordRef) -> Result<(), CcError> {
        Ok(())
    }

    #[inline(always)]
    fn scan(&self, _t: &mut TxnId, _table: u32, _access: AccessMode) -> Result<(), CcError> {
        Ok(())
    }

    #[inline(always)]
    fn validate(&self, _t: &mut TxnId) -> Result<(), CcError> {
        Ok(())
    }

    #[inline(always)]
    fn finish(&self, _t: &mut TxnId) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everything_is_allowed_and_nothing_is_held() {
        let cc = NoConcurrencyControl;
        let mut a = cc.begin(TxnId(1));
        let mut b = cc.begin(TxnId(2));
        let r = RecordRef::new(1, 7);
        assert!(cc.write(&mut a, r).is_ok());
        assert!(cc.write(&mut b, r).is_ok(), "no conflict is ever detected");
        assert!(cc.scan(&mut b, 1, AccessMode::Write).is_ok());
        assert!(cc.validate(&mut a).is_ok());
        cc.finish(&mut a);
        cc.restart(&mut a, TxnId(3));
        assert_eq!(a, TxnId(3));
        assert_eq!(cc.name(), "none");
    }
}
