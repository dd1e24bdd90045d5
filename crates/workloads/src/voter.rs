//! Voter (VoltDB's example, used by the 2025 paper): a phone-in talent-show vote.
//!
//! Tables:
//!
//! | table                  | key                             | columns                         |
//! |------------------------|---------------------------------|---------------------------------|
//! | `voter_contestants`    | contestant_number               | contestant_name                 |
//! | `voter_area_code_state`| area_code                       | state                           |
//! | `voter_votes`          | (phone_number, vote_seq)        | state, contestant_number, created |
//! | `voter_votes_by_phone` | phone_number                    | num_votes                       |
//! | `voter_votes_by_contestant_area` | (contestant_number, area_code) | num_votes           |
//!
//! The last two are VoltDB's materialised views (`v_votes_by_phone_number`, and the votes by
//! contestant and state, kept here by area code so its key is known before the state is), kept
//! by the procedure itself. vote_seq is the voter's vote number (1, 2, ...), so a vote's key
//! needs no global counter.
//!
//! ```text
//! Vote(phone, contestant, max_votes):
//!   round trip 1: get contestant; get votes_by_phone for update; get the area code's state;
//!                 get votes_by_contestant_area for update
//!   contestant missing        → Rejected(InvalidContestant)   (committed, no writes)
//!   num_votes ≥ max_votes     → Rejected(OverLimit)            (committed, no writes)
//!   round trip 2: insert vote (state "XX" for an unknown area code), bump both counters; commit
//! ```
//!
//! Inputs: `scale` × 10,000 voters, phone number i = area code (i mod codes) · 10⁷ + i; each
//! call picks a voter uniformly and a contestant uniformly, 1% of calls naming a contestant
//! that does not exist. At most 2 votes per phone by default.
//!
//! check(): votes per contestant = Σ of its counters; votes per phone = its counter ≤ limit;
//! every vote names a real contestant and its area code's state.

use std::collections::BTreeMap;
use std::sync::Arc;

use engine::db::Database;
use engine::{Connection, TableRef, TableSchema, Tx, TxError, TxResult, Value};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::util::{
    drawn, int, no_procedure, string, with_txn, Args, BatchLoader, CheckProgress, TableScan,
};
use crate::workload::{Condition, Interactions, Procedures, Receipt, Terminal, Workload};

pub const CONTESTANTS: &str = "voter_contestants";
pub const AREA_CODE_STATE: &str = "voter_area_code_state";
pub const VOTES: &str = "voter_votes";
pub const VOTES_BY_PHONE: &str = "voter_votes_by_phone";
pub const VOTES_BY_CONTESTANT_AREA: &str = "voter_votes_by_contestant_area";

pub const CONTESTANT_NAMES: [&str; 12] = [
    "Edwina Burnam",
    "Tabatha Gehling",
    "Kelly Clauss",
    "Jessie Alloway",
    "Alana Bregman",
    "Jessie Eichman",
    "Allie Rogalski",
    "Nita Coster",
    "Kurt Walser",
    "Ericka Dieter",
    "Loraine Nygren",
    "Tania Mattioli",
];

/// A sample of real North American area codes and their states.
pub const AREA_CODES: [(i64, &str); 118] = [
    (201, "NJ"),
    (202, "DC"),
    (203, "CT"),
    (205, "AL"),
    (206, "WA"),
    (207, "ME"),
    (208, "ID"),
    (209, "CA"),
    (210, "TX"),
    (212, "NY"),
    (213, "CA"),
    (214, "TX"),
    (215, "PA"),
    (216, "OH"),
    (217, "IL"),
    (218, "MN"),
    (219, "IN"),
    (225, "LA"),
    (228, "MS"),
    (229, "GA"),
    (231, "MI"),
    (239, "FL"),
    (240, "MD"),
    (248, "MI"),
    (251, "AL"),
    (252, "NC"),
    (253, "WA"),
    (254, "TX"),
    (256, "AL"),
    (260, "IN"),
    (262, "WI"),
    (269, "MI"),
    (270, "KY"),
    (281, "TX"),
    (301, "MD"),
    (302, "DE"),
    (303, "CO"),
    (304, "WV"),
    (305, "FL"),
    (307, "WY"),
    (308, "NE"),
    (309, "IL"),
    (310, "CA"),
    (312, "IL"),
    (313, "MI"),
    (314, "MO"),
    (315, "NY"),
    (316, "KS"),
    (317, "IN"),
    (318, "LA"),
    (319, "IA"),
    (320, "MN"),
    (321, "FL"),
    (323, "CA"),
    (330, "OH"),
    (334, "AL"),
    (336, "NC"),
    (337, "LA"),
    (352, "FL"),
    (360, "WA"),
    (361, "TX"),
    (385, "UT"),
    (401, "RI"),
    (402, "NE"),
    (404, "GA"),
    (405, "OK"),
    (406, "MT"),
    (407, "FL"),
    (408, "CA"),
    (409, "TX"),
    (410, "MD"),
    (412, "PA"),
    (413, "MA"),
    (414, "WI"),
    (415, "CA"),
    (417, "MO"),
    (419, "OH"),
    (423, "TN"),
    (425, "WA"),
    (432, "TX"),
    (434, "VA"),
    (435, "UT"),
    (440, "OH"),
    (501, "AR"),
    (502, "KY"),
    (503, "OR"),
    (504, "LA"),
    (505, "NM"),
    (507, "MN"),
    (508, "MA"),
    (509, "WA"),
    (510, "CA"),
    (512, "TX"),
    (513, "OH"),
    (515, "IA"),
    (517, "MI"),
    (518, "NY"),
    (520, "AZ"),
    (603, "NH"),
    (605, "SD"),
    (608, "WI"),
    (612, "MN"),
    (614, "OH"),
    (615, "TN"),
    (617, "MA"),
    (701, "ND"),
    (702, "NV"),
    (703, "VA"),
    (704, "NC"),
    (801, "UT"),
    (802, "VT"),
    (803, "SC"),
    (808, "HI"),
    (907, "AK"),
    (916, "CA"),
    (919, "NC"),
    (971, "OR"),
    (978, "MA"),
];

const PHONE_BASE: i64 = 10_000_000;

/// Voters per unit of `--scale`.
const VOTERS_PER_SCALE: i64 = 10_000;

/// The largest scale: its voters still have distinct phone numbers below [`PHONE_BASE`].
pub const MAX_SCALE: u64 = ((PHONE_BASE - 1) / VOTERS_PER_SCALE) as u64;

#[derive(Clone, Debug, PartialEq)]
pub struct VoterConfig {
    /// Distinct phone numbers that call.
    pub voters: i64,
    /// Contestants (6 by default, at most 12).
    pub contestants: i64,
    pub max_votes_per_phone: i64,
}

impl VoterConfig {
    /// `scale` × 10,000 voters, 6 contestants, 2 votes each. A scale whose voters overflow
    /// gives `i64::MAX` voters, which [`Voter::new`] refuses.
    pub fn new(scale: u64) -> Self {
        VoterConfig {
            voters: i64::try_from(scale)
                .ok()
                .and_then(|s| s.checked_mul(VOTERS_PER_SCALE))
                .unwrap_or(i64::MAX),
            contestants: 6,
            max_votes_per_phone: 2,
        }
    }
}

pub fn tables() -> Vec<TableSchema> {
    vec![
        TableSchema::new(CONTESTANTS)
            .int("contestant_number")
            .string("contestant_name", 50)
            .key(&["contestant_number"])
            .int_key(&[16]),
        TableSchema::new(AREA_CODE_STATE)
            .int("area_code")
            .string("state", 2)
            .key(&["area_code"])
            .int_key(&[16]),
        TableSchema::new(VOTES)
            .int("phone_number")
            .int("vote_seq")
            .string("state", 2)
            .int("contestant_number")
            .int("created")
            .key(&["phone_number", "vote_seq"])
            .int_key(&[40, 24]),
        TableSchema::new(VOTES_BY_PHONE)
            .int("phone_number")
            .int("num_votes")
            .key(&["phone_number"])
            .int_key(&[40]),
        TableSchema::new(VOTES_BY_CONTESTANT_AREA)
            .int("contestant_number")
            .int("area_code")
            .int("num_votes")
            .key(&["contestant_number", "area_code"])
            .int_key(&[16, 16]),
    ]
}

#[derive(Clone, Debug)]
pub struct VoterTables {
    pub contestants: TableRef,
    pub area_code_state: TableRef,
    pub votes: TableRef,
    pub votes_by_phone: TableRef,
    pub votes_by_contestant_area: TableRef,
}

impl VoterTables {
    pub fn resolve(db: &dyn Connection) -> TxResult<Self> {
        Ok(VoterTables {
            contestants: db.table(CONTESTANTS)?,
            area_code_state: db.table(AREA_CODE_STATE)?,
            votes: db.table(VOTES)?,
            votes_by_phone: db.table(VOTES_BY_PHONE)?,
            votes_by_contestant_area: db.table(VOTES_BY_CONTESTANT_AREA)?,
        })
    }
}

/// One call.
#[derive(Clone, Debug, PartialEq)]
pub struct VoteInput {
    pub phone_number: i64,
    pub contestant_number: i64,
    pub max_votes: i64,
    pub created: i64,
}

impl VoteInput {
    /// The input as the stored procedure's arguments:
    /// `phone_number, contestant_number, max_votes, created`.
    pub fn to_args(&self, out: &mut Vec<Value>) {
        out.extend(
            [
                self.phone_number,
                self.contestant_number,
                self.max_votes,
                self.created,
            ]
            .map(Value::Int),
        );
    }

    /// The input from the stored procedure's arguments ([`VoteInput::to_args`]).
    pub fn from_args(args: &[Value]) -> TxResult<Self> {
        let mut a = Args::new("vote", args);
        let input = VoteInput {
            phone_number: a.int()?,
            contestant_number: a.int()?,
            max_votes: a.int()?,
            created: a.int()?,
        };
        a.finish()?;
        Ok(input)
    }
}

/// What a vote came to; every outcome commits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VoteOutcome {
    Accepted,
    InvalidContestant,
    OverLimit,
}

/// Sets counter `key` of `table` (column 1 of the values after the key) to `count + 1`,
/// inserting it if it was absent (`current` None).
fn bump(
    tx: &mut dyn Tx,
    table: &TableRef,
    key: &[Value],
    col: usize,
    current: Option<i64>,
) -> TxResult<()> {
    match current {
        Some(n) => tx.update(table, key, &[(col, Value::Int(n + 1))]).map(drop),
        None => {
            let mut row = Vec::with_capacity(key.len() + 1);
            row.extend_from_slice(key);
            row.push(Value::Int(1));
            tx.insert(table, &row)
        }
    }
}

/// The Vote procedure.
pub fn vote(tx: &mut dyn Tx, t: &VoterTables, input: &VoteInput) -> TxResult<VoteOutcome> {
    vote_numbered(tx, t, input).map(|(outcome, _)| outcome)
}

/// The Vote procedure, also returning an accepted vote's sequence number for its phone (the
/// vote row's key is `(phone_number, vote_seq)`).
pub fn vote_numbered(
    tx: &mut dyn Tx,
    t: &VoterTables,
    input: &VoteInput,
) -> TxResult<(VoteOutcome, Option<i64>)> {
    let area_code = input.phone_number / PHONE_BASE;
    let phone_key = [Value::Int(input.phone_number)];
    let tally_key = [Value::Int(input.contestant_number), Value::Int(area_code)];
    // Round trip 1: four independent reads, named first (see `Tx::prefetch`), so that a client
    // sends them together.
    let (phone, contestant) = (input.phone_number, input.contestant_number);
    tx.prefetch(&[
        (&t.contestants, &[contestant]),
        (&t.area_code_state, &[area_code]),
    ]);
    tx.prefetch_for_update(
        &[
            (&t.votes_by_phone, &[phone]),
            (&t.votes_by_contestant_area, &[contestant, area_code]),
        ],
        None,
    );
    // Each read looks at its row where it is kept (`Tx::read_columns_with`): no row copied
    // out for a column or two.
    let contestant_exists = tx.read_columns_with(
        &t.contestants,
        &[Value::Int(input.contestant_number)],
        &[0],
        false,
        &mut |_| Ok(()),
    )?;
    let mut votes = None;
    tx.read_columns_with(&t.votes_by_phone, &phone_key, &[1], true, &mut |r| {
        votes = Some(r.int(1)?);
        Ok(())
    })?;
    let mut state = None;
    tx.read_columns_with(
        &t.area_code_state,
        &[Value::Int(area_code)],
        &[1],
        false,
        &mut |r| {
            state = Some(r.str(1)?.to_string());
            Ok(())
        },
    )?;
    if !contestant_exists {
        return Ok((VoteOutcome::InvalidContestant, None));
    }
    let mut tally = None;
    tx.read_columns_with(
        &t.votes_by_contestant_area,
        &tally_key,
        &[2],
        true,
        &mut |r| {
            tally = Some(r.int(2)?);
            Ok(())
        },
    )?;
    if votes.unwrap_or(0) >= input.max_votes {
        return Ok((VoteOutcome::OverLimit, None));
    }
    let state = state.unwrap_or_else(|| "XX".to_string());
    // Round trip 2: the writes, with the commit.
    let seq = votes.unwrap_or(0) + 1;
    tx.insert(
        &t.votes,
        &[
            Value::Int(input.phone_number),
            Value::Int(seq),
            Value::Str(state),
            Value::Int(input.contestant_number),
            Value::Int(input.created),
        ],
    )?;
    bump(tx, &t.votes_by_phone, &phone_key, 1, votes)?;
    bump(tx, &t.votes_by_contestant_area, &tally_key, 2, tally)?;
    Ok((VoteOutcome::Accepted, Some(seq)))
}

/// Draws calls.
pub struct VoterInputs {
    pub config: VoterConfig,
}

impl VoterInputs {
    /// The phone number of voter `i`.
    pub fn phone_of(i: i64) -> i64 {
        let (code, _) = AREA_CODES[(i as usize) % AREA_CODES.len()];
        code * PHONE_BASE + i
    }

    pub fn draw(&self, rng: &mut impl Rng, created: i64) -> VoteInput {
        let voter = rng.gen_range(0..self.config.voters);
        let contestant_number = if rng.gen_range(0..100) == 0 {
            self.config.contestants + 1
        } else {
            rng.gen_range(1..=self.config.contestants)
        };
        VoteInput {
            phone_number: Self::phone_of(voter),
            contestant_number,
            max_votes: self.config.max_votes_per_phone,
            created,
        }
    }
}

/// The Voter workload.
pub struct Voter {
    pub config: VoterConfig,
}

impl Voter {
    pub fn new(config: VoterConfig) -> Result<Voter, String> {
        if !(1..=CONTESTANT_NAMES.len() as i64).contains(&config.contestants) {
            return Err(format!(
                "contestants must be 1..=12, not {}",
                config.contestants
            ));
        }
        if config.voters < 1 || config.voters >= PHONE_BASE {
            return Err(format!(
                "Voter holds 1 to {} voters (scale 1 to {MAX_SCALE}: phone numbers have 7 digits \
                 after the area code), not {}",
                PHONE_BASE - 1,
                config.voters
            ));
        }
        if config.max_votes_per_phone < 1 {
            return Err(format!(
                "votes per phone number must be at least 1, not {}",
                config.max_votes_per_phone
            ));
        }
        Ok(Voter { config })
    }
}

struct VoterTerminal {
    tables: VoterTables,
    inputs: VoterInputs,
    rng: SmallRng,
    input: Option<VoteInput>,
    /// The vote row the last successful run inserted: (phone_number, vote_seq).
    vote: Option<(i64, i64)>,
}

impl Terminal for VoterTerminal {
    fn next(&mut self) -> usize {
        self.input = Some(self.inputs.draw(&mut self.rng, crate::util::now_seconds()));
        0
    }

    fn run(&mut self, tx: &mut dyn Tx) -> TxResult<()> {
        let input = drawn(&self.input, "run")?;
        self.vote = None;
        let (_, seq) = vote_numbered(tx, &self.tables, input)?;
        self.vote = seq.map(|seq| (input.phone_number, seq));
        Ok(())
    }

    fn args(&self, out: &mut Vec<Value>) -> TxResult<()> {
        let input = drawn(&self.input, "args")?;
        input.to_args(out);
        Ok(())
    }

    fn returned(&mut self, values: &[Value]) -> TxResult<()> {
        let input = drawn(&self.input, "returned")?;
        // `outcome, vote_seq or NULL` (see `VoterProcedures`).
        self.vote = match values.get(1) {
            Some(Value::Int(seq)) => Some((input.phone_number, *seq)),
            Some(Value::Null) => None,
            other => {
                return Err(TxError::Invalid(format!(
                    "vote returned {other:?} for its sequence number"
                )))
            }
        };
        Ok(())
    }

    fn receipts(&self, out: &mut Vec<Receipt>) {
        if let Some((phone, seq)) = self.vote {
            out.push(Receipt::present(VOTES, &[phone, seq]));
        }
    }
}

/// Vote as a stored procedure: returns the outcome (0 accepted, 1 invalid contestant, 2 over
/// the limit) and an accepted vote's sequence number for its phone, or NULL.
struct VoterProcedures {
    tables: VoterTables,
}

impl Procedures for VoterProcedures {
    fn call(
        &self,
        tx: &mut dyn Tx,
        txn: usize,
        args: &[Value],
        out: &mut Vec<Value>,
    ) -> TxResult<()> {
        if txn != 0 {
            return Err(no_procedure("voter", txn));
        }
        let (outcome, seq) = vote_numbered(tx, &self.tables, &VoteInput::from_args(args)?)?;
        let code = match outcome {
            VoteOutcome::Accepted => 0,
            VoteOutcome::InvalidContestant => 1,
            VoteOutcome::OverLimit => 2,
        };
        out.extend([Value::Int(code), seq.map_or(Value::Null, Value::Int)]);
        Ok(())
    }
}

impl Workload for Voter {
    fn name(&self) -> &'static str {
        "voter"
    }

    fn txn_names(&self) -> &'static [&'static str] {
        &["vote"]
    }

    fn interactions(&self) -> Vec<Interactions> {
        vec![Interactions {
            name: "vote",
            round_trips: 2,
            note: "get contestant, phone count, area-code state, tally (1); insert vote + \
                   update both counts, sent with the commit (1) — Table 2: Voter, 2",
        }]
    }

    fn create_schema(&self, db: &Database) -> TxResult<()> {
        for table in tables() {
            db.create_table(table)?;
        }
        Ok(())
    }

    fn load(&self, db: &Arc<Database>, progress: &(dyn Fn(u64, u64) + Sync)) -> TxResult<()> {
        let t = VoterTables::resolve(db)?;
        let total = (self.config.contestants as usize + AREA_CODES.len()) as u64;
        let report = |rows: u64| progress(rows, total);
        let mut loader = BatchLoader::new(db, &report);
        for (n, name) in (1..=self.config.contestants).zip(CONTESTANT_NAMES) {
            loader.push(
                &t.contestants,
                vec![Value::Int(n), Value::Str(name.to_string())],
            )?;
        }
        for (code, state) in AREA_CODES {
            loader.push(
                &t.area_code_state,
                vec![Value::Int(code), Value::Str(state.to_string())],
            )?;
        }
        loader.flush()?;
        // No vote writes the contestants or the area codes, and every vote reads one row of
        // each: read-only, those reads take no record lock (twelve contestants' lock heads
        // that every worker's votes shared) and latch no page (one page holds all twelve).
        db.set_read_only(CONTESTANTS, true)?;
        db.set_read_only(AREA_CODE_STATE, true)
    }

    fn terminal(
        &self,
        db: &dyn Connection,
        _id: usize,
        _terminals: usize,
        seed: u64,
    ) -> TxResult<Box<dyn Terminal>> {
        Ok(Box::new(VoterTerminal {
            tables: VoterTables::resolve(db)?,
            inputs: VoterInputs {
                config: self.config.clone(),
            },
            rng: SmallRng::seed_from_u64(seed),
            input: None,
            vote: None,
        }))
    }

    fn procedures(&self, conn: &dyn Connection) -> TxResult<Box<dyn Procedures>> {
        Ok(Box::new(VoterProcedures {
            tables: VoterTables::resolve(conn)?,
        }))
    }

    fn check_with_progress(
        &self,
        db: &Arc<Database>,
        progress: CheckProgress<'_>,
    ) -> TxResult<Vec<Condition>> {
        let t = VoterTables::resolve(db)?;
        let votes = TableScan::new(db, &t.votes, &[0, 2, 3])?.reporting_to(progress);
        let by_phone = TableScan::new(db, &t.votes_by_phone, &[0, 1])?.reporting_to(progress);
        let tallies =
            TableScan::new(db, &t.votes_by_contestant_area, &[0, 2])?.reporting_to(progress);
        let states: BTreeMap<i64, &str> = AREA_CODES.iter().copied().collect();
        // Per contestant: (votes, Σ tallies); per phone: (votes, its count).
        let (per_contestant, per_phone, bad_votes) = with_txn(db, |tx| {
            let mut per_contestant = BTreeMap::<i64, (i64, i64)>::new();
            let mut per_phone = BTreeMap::<i64, (i64, i64)>::new();
            let mut bad_votes = Vec::new();
            votes.for_each(tx, |v| {
                let (phone, state, contestant) = (int(v, 0)?, string(v, 1)?, int(v, 2)?);
                per_contestant.entry(contestant).or_default().0 += 1;
                per_phone.entry(phone).or_default().0 += 1;
                let expected = states.get(&(phone / PHONE_BASE)).copied().unwrap_or("XX");
                if (!(1..=self.config.contestants).contains(&contestant) || state != expected)
                    && bad_votes.len() < 3
                {
                    bad_votes.push(format!(
                        "phone {phone}: contestant {contestant}, state {state}"
                    ));
                }
                Ok(())
            })?;
            tallies.for_each(tx, |r| {
                per_contestant.entry(int(r, 0)?).or_default().1 += int(r, 1)?;
                Ok(())
            })?;
            by_phone.for_each(tx, |r| {
                per_phone.entry(int(r, 0)?).or_default().1 += int(r, 1)?;
                Ok(())
            })?;
            Ok((per_contestant, per_phone, bad_votes))
        })?;
        let totals: Vec<String> = per_contestant
            .iter()
            .filter(|(_, (votes, tally))| votes != tally)
            .take(3)
            .map(|(c, (votes, tally))| format!("contestant {c}: {votes} votes, tally {tally}"))
            .collect();
        let limit = self.config.max_votes_per_phone;
        let phones: Vec<String> = per_phone
            .iter()
            .filter(|(_, (votes, count))| votes != count || *count > limit)
            .take(3)
            .map(|(p, (votes, count))| format!("phone {p}: {votes} votes, count {count}"))
            .collect();
        let condition = |name: &str, description: &str, bad: Vec<String>| Condition {
            name: name.to_string(),
            description: description.to_string(),
            violation: (!bad.is_empty()).then(|| bad.join("; ")),
        };
        Ok(vec![
            condition("Voter totals", "votes per contestant = its tallies", totals),
            condition(
                "Voter limit",
                "votes per phone = its count <= the limit",
                phones,
            ),
            condition(
                "Voter votes",
                "every vote names a real contestant and its area code's state",
                bad_votes,
            ),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_beyond_the_phone_numbers_are_refused_in_one_sentence() {
        assert!(Voter::new(VoterConfig::new(MAX_SCALE)).is_ok());
        for scale in [MAX_SCALE + 1, i64::MAX as u64, u64::MAX] {
            let err = Voter::new(VoterConfig::new(scale))
                .err()
                .unwrap_or_else(|| panic!("scale {scale} accepted"));
            assert!(err.contains(&MAX_SCALE.to_string()), "{err}");
            assert!(!err.contains("VoterConfig"), "a Debug dump: {err}");
        }
    }

    #[test]
    fn one_percent_of_calls_name_an_invalid_contestant() {
        let inputs = VoterInputs {
            config: VoterConfig::new(1),
        };
        let mut rng = SmallRng::seed_from_u64(1);
        let mut invalid = 0;
        let mut phones = std::collections::HashSet::new();
        for _ in 0..100_000 {
            let v = inputs.draw(&mut rng, 0);
            assert!((1..=7).contains(&v.contestant_number));
            invalid += usize::from(v.contestant_number == 7);
            let code = v.phone_number / PHONE_BASE;
            assert!(AREA_CODES.iter().any(|(c, _)| *c == code));
            phones.insert(v.phone_number);
        }
        assert!((800..1200).contains(&invalid), "{invalid}");
        assert!(phones.len() <= 10_000 && phones.len() > 9_900);
        let codes: std::collections::HashSet<_> = AREA_CODES.iter().map(|(c, _)| c).collect();
        assert_eq!(codes.len(), AREA_CODES.len(), "area codes are distinct");
    }
}
