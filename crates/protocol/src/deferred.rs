//! Deferred writes: the writes of a transaction whose results its procedure cannot observe,
//! kept by whoever runs the procedure away from the engine — a client's interactive
//! transaction ([`client::RemoteTx`]), a guest's procedure ([`crate::guest`]) — and sent in
//! front of its next round trip, in the order made, or with its end.
//!
//! * every insert (it returns `Ok(())` at once);
//! * an update or delete of a row the transaction holds exclusively and knows to exist (it
//!   returns `Ok(true)` at once): a row a read with `for_update` found, a row an earlier
//!   update found, or (a guess, see below) a row a for-update scan returned or the
//!   transaction inserted. A delete makes the row unknown again.
//! * a request for isolation level 1 ([`Op::ReadCommitted`], answered `Set`), which is not a
//!   write but travels the same way, in front of the reads it is for.
//!
//! Why this is safe: the engine runs two-phase locking, so a row the transaction has locked
//! exclusively and seen cannot change or vanish until it ends, except by its own writes,
//! which are tracked here; the engine's answer to such an update is known in advance. The
//! writes travel first in the next round trip, so every read sees them (read-your-writes).
//! Their answers are checked when they come back ([`check`]): `Inserted` for an insert,
//! `Found(true)` for an update or delete; anything else fails the transaction. So an insert's
//! error (a duplicate key, say) is returned by the next operation that makes a round trip, not
//! by the insert: the transaction fails the same way, one call later.
//!
//! Neither side knows the tables' primary keys (a catalog names tables, not their columns), so
//! two cases rest on a guess: a row a for-update scan of a table by a key prefix `P` returned
//! is taken to have the key `P` followed by the row's first values (as a procedure names the
//! rows it scanned), and a row the transaction inserted to have the key `K` when every value
//! of `K` is one of the row's. A write deferred on such a guess is answered `Ok(true)`; if the
//! row it names turns out not to exist, the transaction fails with [`TxError::Invalid`]
//! before it can commit.
//!
//! [`client::RemoteTx`]: ../../client/struct.RemoteTx.html

use engine::{Row, TxError, TxResult, Value};

use crate::read_ahead::ReadAhead;
use crate::rows::{same_value, RowList};
use crate::{Op, OpResult};

/// The most values after a scan's prefix taken as a guess of a scanned row's key.
pub const MAX_GUESSED_KEY_TAIL: usize = 8;

/// What the engine must answer a deferred write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// An insert: `Inserted`.
    Inserted,
    /// The same, of a row the transaction has deleted since (before the insert was sent): no
    /// longer taken to exist.
    InsertedDeleted,
    /// An update or delete of a row held and known to exist: `Found(true)`.
    Found,
    /// The same, of a row whose key was guessed (see the module's documentation).
    Guessed,
    /// A request for read committed ([`Op::ReadCommitted`]): `Set`.
    Set,
}

/// How sure the transaction is that it holds a row exclusively and that it exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Known {
    /// Read with `for_update` and found, or found by an update: under two-phase locking it
    /// cannot change or vanish but by this transaction's own writes.
    Held,
    /// A key guessed from a for-update scan's row or from an inserted row.
    Guessed,
}

/// Rows by table id and key.
type RowSet = RowList<(u32, Vec<Value>)>;

fn add(set: &mut RowSet, table: u32, key: &[Value]) {
    set.add_with(table, key, || (table, key.to_vec()));
}

/// A transaction's deferred writes, what it knows of its rows, and its hinted reads. Empty
/// outside a transaction; cleared whenever one ends, however it ends.
#[derive(Default)]
pub struct Deferred {
    /// Writes not sent yet, in the order made, and what each must be answered.
    ops: Vec<Op>,
    expect: Vec<Expect>,
    /// Rows held exclusively and known to exist.
    held: RowSet,
    /// Keys guessed from the rows of for-update scans.
    scanned: RowSet,
    /// Rows this transaction inserted, sent ([`Deferred::sent`]) and has not deleted since:
    /// table id and values. Those not sent yet are the inserts of `ops` (each row is kept once).
    inserted: Vec<(u32, Vec<Value>)>,
    /// The procedure's hinted reads ([`engine::Tx::prefetch`] and its kin): those not sent
    /// yet, and what those sent returned.
    pub ahead: ReadAhead,
}

impl Deferred {
    pub fn clear(&mut self) {
        self.ops.clear();
        self.expect.clear();
        self.held.clear();
        self.scanned.clear();
        self.inserted.clear();
        self.ahead.clear();
    }

    /// Whether writes wait to be sent.
    pub fn has_pending(&self) -> bool {
        !self.ops.is_empty()
    }

    /// Whether a write waiting to be sent rests on a guessed key.
    pub fn has_guessed(&self) -> bool {
        self.expect.contains(&Expect::Guessed)
    }

    /// The writes waiting to be sent, in the order made, and what each must be answered;
    /// none wait afterwards. The rows they insert are known again once given back, sent,
    /// to [`Deferred::sent`].
    pub fn take(&mut self) -> (Vec<Op>, Vec<Expect>) {
        (
            std::mem::take(&mut self.ops),
            std::mem::take(&mut self.expect),
        )
    }

    /// Asks for isolation level 1 from the next round trip on ([`engine::Tx::read_committed`]):
    /// the request travels in front of the reads it is for, as the writes do; asked again before
    /// it has gone, it is not sent twice.
    pub fn read_committed(&mut self) {
        if !self.expect.contains(&Expect::Set) {
            self.ops.push(Op::ReadCommitted);
            self.expect.push(Expect::Set);
        }
    }

    /// The writes [`Deferred::take`] gave, `ops` with `expect`, were sent and answered as
    /// expected: the rows they inserted, and have not deleted since, are kept for
    /// [`Deferred::known`]'s guess.
    pub fn sent(&mut self, ops: impl IntoIterator<Item = Op>, expect: &[Expect]) {
        for (op, expect) in ops.into_iter().zip(expect) {
            if let (Op::Insert { table, row }, Expect::Inserted) = (op, expect) {
                self.inserted.push((table, row));
            }
        }
    }

    /// Defers an insert of `row` into `table`.
    pub fn insert(&mut self, table: u32, row: &[Value]) {
        // What a hinted scan of the table returned may now miss the row.
        self.ahead.stale(table, None);
        self.ops.push(Op::Insert {
            table,
            row: row.to_vec(),
        });
        self.expect.push(Expect::Inserted);
    }

    /// Defers `op`, an update or delete of row `key` of `table`, if the transaction holds the
    /// row exclusively and knows it exists (its answer is then `true`); gives `op` back, to be
    /// sent now, when nothing is known of the row. A delete leaves the row unknown either way.
    pub fn write(&mut self, table: u32, key: &[Value], op: Op) -> Result<(), Op> {
        let known = self.known(table, key);
        if matches!(op, Op::Delete { .. }) {
            self.forget(table, key);
        }
        let expect = match known {
            Some(Known::Held) => Expect::Found,
            Some(Known::Guessed) => Expect::Guessed,
            None => return Err(op),
        };
        self.ops.push(op);
        self.expect.push(expect);
        // What a hinted read returned of the row is stale once the write is made.
        self.ahead.stale(table, Some(key));
        Ok(())
    }

    /// A read of row `key` of `table` with `for_update` came back: held if found, else not
    /// there.
    pub fn read_for_update(&mut self, table: u32, key: &[Value], row: Option<&Row>) {
        match row {
            Some(_) => add(&mut self.held, table, key),
            None => self.forget(table, key),
        }
    }

    /// An update sent now found row `key` of `table`: locked exclusively, and there.
    pub fn updated(&mut self, table: u32, key: &[Value]) {
        add(&mut self.held, table, key);
    }

    /// A for-update scan of `table` by key `prefix` returned `rows`: each locked exclusively,
    /// and there; its key guessed as the prefix, then the first values fetched.
    pub fn scanned_for_update(&mut self, table: u32, prefix: &[Value], rows: &[Row]) {
        let mut key = prefix.to_vec();
        for row in rows {
            key.truncate(prefix.len());
            for v in row.iter().take(MAX_GUESSED_KEY_TAIL) {
                key.push(v.clone());
                add(&mut self.scanned, table, &key);
            }
        }
    }

    /// Whether the transaction holds row `key` of `table` exclusively and it exists.
    pub fn known(&self, table: u32, key: &[Value]) -> Option<Known> {
        if key.is_empty() || self.knows_nothing() {
            return None;
        }
        if self.held.contains(table, key) {
            return Some(Known::Held);
        }
        if self.scanned.contains(table, key)
            || self
                .inserted
                .iter()
                .any(|(t, row)| *t == table && names(row, key))
            || self
                .ops
                .iter()
                .zip(&self.expect)
                .any(|(op, expect)| *expect == Expect::Inserted && inserts(op, table, key))
        {
            return Some(Known::Guessed);
        }
        None
    }

    /// Whether nothing is known of any row (the common case of a transaction's start).
    fn knows_nothing(&self) -> bool {
        self.held.is_empty()
            && self.scanned.is_empty()
            && self.inserted.is_empty()
            && self.ops.is_empty()
    }

    /// Row `key` of `table` was deleted (or is absent): no longer known to exist.
    pub fn forget(&mut self, table: u32, key: &[Value]) {
        if self.knows_nothing() {
            return;
        }
        self.held.remove(table, key);
        self.scanned.remove(table, key);
        self.inserted
            .retain(|(t, row)| !(*t == table && names(row, key)));
        for (op, expect) in self.ops.iter().zip(&mut self.expect) {
            if *expect == Expect::Inserted && inserts(op, table, key) {
                *expect = Expect::InsertedDeleted;
            }
        }
    }
}

/// Whether `op` inserts a row of `table` that `key` could name ([`names`]).
fn inserts(op: &Op, table: u32, key: &[Value]) -> bool {
    matches!(op, Op::Insert { table: t, row } if *t == table && names(row, key))
}

/// Whether `key` could be the key of the inserted `row`: each of its values is a distinct
/// one of the row's (a guess: neither side knows which columns are the key).
fn names(row: &[Value], key: &[Value]) -> bool {
    if key.is_empty() || key.len() > row.len() {
        return false;
    }
    let mut used = vec![false; row.len()];
    key.iter().all(
        |k| match (0..row.len()).find(|&i| !used[i] && same_value(&row[i], k)) {
            Some(i) => {
                used[i] = true;
                true
            }
            None => false,
        },
    )
}

/// Checks the engine's answers to deferred writes `ops`, which were to be answered as
/// `expect` says.
pub fn check(ops: &[Op], expect: &[Expect], results: &[OpResult]) -> TxResult<()> {
    for ((op, want), got) in ops.iter().zip(expect).zip(results) {
        match (want, got) {
            (Expect::Inserted | Expect::InsertedDeleted, OpResult::Inserted)
            | (Expect::Set, OpResult::Set)
            | (Expect::Found | Expect::Guessed, OpResult::Found(true)) => {}
            (Expect::Found, OpResult::Found(false)) => {
                return Err(TxError::Connection(format!(
                    "a deferred write found no row, though the transaction held it locked \
                     and had seen it (two-phase locking broken?): {op:?}"
                )))
            }
            (Expect::Guessed, OpResult::Found(false)) => {
                return Err(TxError::Invalid(format!(
                    "a deferred write found no row: its key was taken for that of a row the \
                     transaction had scanned for update or inserted, and no such row exists: \
                     {op:?}"
                )))
            }
            _ => {
                return Err(TxError::Connection(format!(
                    "a deferred write was answered with {got:?}"
                )))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(table: u32, key: i64) -> Op {
        Op::Update {
            table,
            key: vec![Value::Int(key)],
            set: vec![(1, Value::Int(0))],
        }
    }

    #[test]
    fn only_rows_held_or_guessed_are_written_blind() {
        let mut d = Deferred::default();
        let k = |n| [Value::Int(n)];
        // Nothing known: the update goes now.
        assert!(d.write(1, &k(1), update(1, 1)).is_err());
        // Read for update and found: held.
        d.read_for_update(1, &k(1), Some(&vec![Value::Int(1)]));
        assert_eq!(d.known(1, &k(1)), Some(Known::Held));
        assert_eq!(d.known(2, &k(1)), None, "another table's row");
        assert!(d.write(1, &k(1), update(1, 1)).is_ok());
        // Read for update and absent: not known.
        d.read_for_update(1, &k(2), None);
        assert_eq!(d.known(1, &k(2)), None);
        // Inserted: its key guessed from its values, in any order.
        d.insert(3, &[Value::Int(7), Value::Str("x".into()), Value::Int(9)]);
        assert_eq!(
            d.known(3, &[Value::Int(9), Value::Int(7)]),
            Some(Known::Guessed)
        );
        assert_eq!(
            d.known(3, &[Value::Int(9), Value::Int(9)]),
            None,
            "used twice"
        );
        // Scanned for update under prefix 5: the prefix, then the row's first values.
        d.scanned_for_update(4, &[Value::Int(5)], &[vec![Value::Int(6), Value::Int(8)]]);
        assert_eq!(
            d.known(4, &[Value::Int(5), Value::Int(6)]),
            Some(Known::Guessed)
        );
        assert_eq!(
            d.known(4, &[Value::Int(5), Value::Int(6), Value::Int(8)]),
            Some(Known::Guessed)
        );
        assert_eq!(d.known(4, &[Value::Int(6)]), None);
        // A delete forgets the row, deferred or not.
        let delete = Op::Delete {
            table: 1,
            key: k(1).to_vec(),
        };
        assert!(d.write(1, &k(1), delete.clone()).is_ok());
        assert_eq!(d.known(1, &k(1)), None);
        assert_eq!(d.write(1, &k(1), delete.clone()), Err(delete));
        let (ops, expect) = d.take();
        assert_eq!(ops.len(), 3);
        assert_eq!(expect, [Expect::Found, Expect::Inserted, Expect::Found]);
        assert!(!d.has_pending());
        assert!(!d.has_guessed());
        // Sent and answered: the inserted row is known again, its copy kept from the op.
        d.sent(ops, &expect);
        assert!(d.write(3, &[Value::Int(7)], update(3, 7)).is_ok());
        assert!(d.has_guessed());
        d.clear();
        assert_eq!(d.known(3, &[Value::Int(7)]), None);
    }

    #[test]
    fn an_insert_deleted_before_it_is_sent_is_sent_and_its_row_not_known() {
        let mut d = Deferred::default();
        let row = [Value::Int(7), Value::Int(8)];
        d.insert(3, &row);
        d.insert(3, &[Value::Int(9), Value::Int(8)]);
        let key = [Value::Int(7)];
        assert_eq!(d.known(3, &key), Some(Known::Guessed));
        let delete = Op::Delete {
            table: 3,
            key: key.to_vec(),
        };
        assert!(d.write(3, &key, delete).is_ok());
        assert_eq!(d.known(3, &key), None);
        assert_eq!(d.known(3, &[Value::Int(9)]), Some(Known::Guessed));
        let (ops, expect) = d.take();
        assert_eq!(
            expect,
            [Expect::InsertedDeleted, Expect::Inserted, Expect::Guessed]
        );
        let answers = [
            OpResult::Inserted,
            OpResult::Inserted,
            OpResult::Found(true),
        ];
        assert!(check(&ops, &expect, &answers).is_ok());
        d.sent(ops, &expect);
        assert_eq!(d.known(3, &key), None, "deleted stays deleted once sent");
        assert_eq!(d.known(3, &[Value::Int(9)]), Some(Known::Guessed));
    }

    #[test]
    fn a_deferred_write_answered_otherwise_fails_the_transaction() {
        let ops = [update(1, 1), update(1, 2), update(1, 3)];
        let ok = [
            OpResult::Found(true),
            OpResult::Found(true),
            OpResult::Inserted,
        ];
        let expect = [Expect::Found, Expect::Guessed, Expect::Inserted];
        assert!(check(&ops, &expect, &ok).is_ok());
        let held_gone = [
            OpResult::Found(false),
            OpResult::Found(true),
            OpResult::Inserted,
        ];
        assert!(matches!(
            check(&ops, &expect, &held_gone),
            Err(TxError::Connection(m)) if m.contains("two-phase locking")
        ));
        let guess_wrong = [
            OpResult::Found(true),
            OpResult::Found(false),
            OpResult::Inserted,
        ];
        assert!(matches!(
            check(&ops, &expect, &guess_wrong),
            Err(TxError::Invalid(_))
        ));
        let odd = [
            OpResult::Found(true),
            OpResult::Found(true),
            OpResult::Row(None),
        ];
        assert!(check(&ops, &expect, &odd).is_err());
    }

    #[test]
    fn a_read_committed_request_goes_once_in_front_of_what_follows_and_is_answered_set() {
        let mut d = Deferred::default();
        d.read_committed();
        d.insert(1, &[Value::Int(1)]);
        d.read_committed();
        let (ops, expect) = d.take();
        assert!(
            matches!(ops[..], [Op::ReadCommitted, Op::Insert { .. }]),
            "{ops:?}"
        );
        assert_eq!(expect, [Expect::Set, Expect::Inserted]);
        assert!(check(&ops, &expect, &[OpResult::Set, OpResult::Inserted]).is_ok());
        assert!(check(&ops, &expect, &[OpResult::Found(true), OpResult::Inserted]).is_err());
        // Sent: asked again, it goes again (the engine's request is idempotent).
        d.read_committed();
        assert!(d.has_pending());
    }
}
