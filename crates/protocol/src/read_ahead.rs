//! Reading ahead on a procedure's hints, where each operation crosses a boundary: a client's
//! round trip to the server ([`client::RemoteTx`]), an isolated procedure's exchange with its
//! host (`guest::BoundaryTx`).
//!
//! A procedure names the rows it knows from its input in hints ([`Tx::prefetch`] and its
//! kin). Across a boundary those hints become reads: each hinted row's read is kept (whole,
//! shared, or exclusive where the hint says the row will be updated) and sent in front of the
//! next operation that crosses, or alone when the next read is one of them; what came back
//! answers the reads of those rows that follow, as long as the lock it was read under
//! suffices. The transaction's own write of a row makes its answer stale (the next read
//! crosses); a hinted read sent after a write of its row runs after it and sees it.
//!
//! A hinted read is a real read: it takes its lock when it is sent (so hints are named in the
//! order the procedure locks), and its error fails the operation it travelled with.
//!
//! [`client::RemoteTx`]: ../../client/struct.RemoteTx.html
//! [`Tx::prefetch`]: engine::Tx::prefetch

use std::collections::BTreeMap;

use engine::{Fetch, Row, TableRef, Value};

use crate::Op;

/// A read a hint named: row `key` of `table`, whole, for update or not.
#[derive(Debug)]
pub struct HintedRead {
    pub table: u32,
    pub key: Vec<Value>,
    pub row_key: Vec<u8>,
    pub for_update: bool,
}

impl HintedRead {
    /// The read as an operation: the whole row.
    pub fn op(&self) -> Op {
        Op::Get {
            table: self.table,
            key: self.key.clone(),
            columns: None,
            for_update: self.for_update,
        }
    }
}

/// What a hinted read returned.
struct Answered {
    for_update: bool,
    row: Option<Row>,
}

/// One transaction's hinted reads not sent yet, and what those sent returned. Cleared when
/// the transaction ends.
#[derive(Default)]
pub struct ReadAhead {
    reads: Vec<HintedRead>,
    answered: BTreeMap<Vec<u8>, Answered>,
}

impl ReadAhead {
    pub fn clear(&mut self) {
        self.reads.clear();
        self.answered.clear();
    }

    /// Keeps the reads of `rows` (`for_update` or not) to send; a row already read, or to be
    /// read, under a lock that suffices is not read again.
    pub fn hint(&mut self, rows: &[(&TableRef, &[i64])], for_update: bool) {
        for (table, key) in rows {
            let key: Vec<Value> = key.iter().map(|&k| Value::Int(k)).collect();
            let row_key = row_key(table.id, &key);
            if self
                .answered
                .get(&row_key)
                .is_some_and(|a| a.for_update || !for_update)
            {
                continue;
            }
            match self.reads.iter_mut().find(|r| r.row_key == row_key) {
                Some(read) => read.for_update |= for_update,
                None => self.reads.push(HintedRead {
                    table: table.id,
                    key,
                    row_key,
                    for_update,
                }),
            }
        }
    }

    /// The reads to send now, in the order hinted.
    pub fn take(&mut self) -> Vec<HintedRead> {
        std::mem::take(&mut self.reads)
    }

    /// Keeps what a hinted read returned.
    pub fn answered(&mut self, read: HintedRead, row: Option<Row>) {
        self.answered.insert(
            read.row_key,
            Answered {
                for_update: read.for_update,
                row,
            },
        );
    }

    /// The answer to a read of row `key` of `table` (`for_update` or not) that a hinted read
    /// already gave: the row, or the columns `fetch` names of it, or its absence. `None`
    /// where no hinted read answered it (or one read it shared and this read wants it
    /// exclusively, or it names a column past the row's, which is left to the engine to
    /// refuse).
    pub fn answer(
        &self,
        table: u32,
        key: &[Value],
        fetch: Fetch<'_>,
        for_update: bool,
    ) -> Option<Option<Row>> {
        // Most transactions hint nothing: no key to build for an empty map.
        if self.answered.is_empty() {
            return None;
        }
        let answered = self.answered.get(&row_key(table, key))?;
        if for_update && !answered.for_update {
            return None;
        }
        let Some(row) = &answered.row else {
            return Some(None);
        };
        match fetch {
            Fetch::All => Some(Some(row.clone())),
            Fetch::Cols(cols) => cols
                .iter()
                .map(|&c| row.get(c).cloned())
                .collect::<Option<Row>>()
                .map(Some),
        }
    }

    /// Whether a hinted read not sent yet will answer a read of row `key` of `table`
    /// (`for_update` or not).
    pub fn will_answer(&self, table: u32, key: &[Value], for_update: bool) -> bool {
        if self.reads.is_empty() {
            return false;
        }
        let row_key = row_key(table, key);
        self.reads
            .iter()
            .any(|r| r.row_key == row_key && (r.for_update || !for_update))
    }

    /// The transaction wrote row `key` of `table` (`None`: inserted into `table`): what a
    /// hinted read returned of it is stale.
    pub fn stale(&mut self, table: u32, key: Option<&[Value]>) {
        match key {
            Some(key) => {
                self.answered.remove(&row_key(table, key));
            }
            None => self.answered.retain(|k, _| k[..4] != table.to_le_bytes()),
        }
    }
}

/// A hashable encoding of row `key` of `table` (`Value` holds floats, so is not `Hash`):
/// the table id, the number of values, then each value tagged, floats by their bits.
pub fn row_key(table: u32, key: &[Value]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + 9 * key.len());
    out.extend_from_slice(&table.to_le_bytes());
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    for v in key {
        match v {
            Value::Null => out.push(0),
            Value::Int(i) => {
                out.push(1);
                out.extend_from_slice(&i.to_le_bytes());
            }
            Value::Float(f) => {
                out.push(2);
                out.extend_from_slice(&f.to_bits().to_le_bytes());
            }
            Value::Str(s) => {
                out.push(3);
                out.extend_from_slice(&(s.len() as u32).to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(id: u32) -> TableRef {
        TableRef {
            name: format!("t{id}"),
            id,
        }
    }

    #[test]
    fn a_hinted_read_answers_by_lock_and_column_until_the_row_is_written() {
        let (t, u) = (table(1), table(2));
        let mut ahead = ReadAhead::default();
        ahead.hint(&[(&t, &[7]), (&u, &[7])], false);
        ahead.hint(&[(&t, &[7])], true);
        let key = [Value::Int(7)];
        assert!(
            ahead.will_answer(1, &key, true),
            "the second hint upgraded the read"
        );
        assert!(!ahead.will_answer(2, &key, true));
        assert!(ahead.will_answer(2, &key, false));
        let reads = ahead.take();
        assert_eq!(reads.len(), 2);
        assert!(!ahead.will_answer(1, &key, false), "taken");
        let row = vec![Value::Int(7), Value::Str("x".into()), Value::Int(3)];
        for read in reads {
            let found = (read.table == 1).then(|| row.clone());
            ahead.answered(read, found);
        }
        assert_eq!(
            ahead.answer(1, &key, Fetch::All, true),
            Some(Some(row.clone()))
        );
        assert_eq!(
            ahead.answer(1, &key, Fetch::Cols(&[2, 0]), false),
            Some(Some(vec![Value::Int(3), Value::Int(7)]))
        );
        assert_eq!(ahead.answer(1, &key, Fetch::Cols(&[3]), false), None);
        assert_eq!(
            ahead.answer(2, &key, Fetch::All, false),
            Some(None),
            "absent"
        );
        assert_eq!(
            ahead.answer(2, &key, Fetch::All, true),
            None,
            "read shared only"
        );
        assert_eq!(ahead.answer(1, &[Value::Int(8)], Fetch::All, false), None);
        // Hinted again: already answered, not read again.
        ahead.hint(&[(&t, &[7])], true);
        assert!(ahead.take().is_empty());
        ahead.stale(1, Some(&key));
        assert_eq!(ahead.answer(1, &key, Fetch::All, false), None);
        ahead.stale(2, None);
        assert_eq!(ahead.answer(2, &key, Fetch::All, false), None);
    }

    #[test]
    fn row_keys_tell_tables_and_values_apart() {
        let a = row_key(1, &[Value::Int(1), Value::Int(2)]);
        assert_ne!(a, row_key(2, &[Value::Int(1), Value::Int(2)]));
        assert_ne!(a, row_key(1, &[Value::Int(2), Value::Int(1)]));
        assert_ne!(a, row_key(1, &[Value::Int(1)]));
        assert_ne!(
            row_key(1, &[Value::Str("a".into())]),
            row_key(1, &[Value::Str("b".into())])
        );
    }
}
