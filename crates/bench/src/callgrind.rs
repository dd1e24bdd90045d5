//! Callgrind: its output format, the attribution of costs to operations and components, and
//! the client requests that start instrumentation and dump a profile from inside the program.
//!
//! ## The output format (what [`Profile::parse`] reads)
//!
//! ```text
//!   events: Ir                       event names; cost columns follow in this order
//!   positions: line                  position columns before the costs ("instr line" = 2)
//!   fl=(3) src/table.rs              file, defining id 3 ("fl=(3)" reuses it); fi=/fe= likewise
//!   fn=(7) engine::table::Records::with
//!   15 120                           self cost of fn 7: position(s), then costs
//!   cfn=(9) storage::heap::Heap::with_record
//!   calls=4 88                       4 calls to fn 9 (target position 88) ...
//!   16 900                           ... whose inclusive cost is the next line
//!   totals: 5000                     (or summary:) the sum of all self costs
//! ```
//!
//! Positions may be absolute, `+N`/`-N` relative or `*` (same); they are skipped, never
//! interpreted. Names are compressed: `(id) name` defines, `(id)` refers; `fn`/`cfn` share one
//! id space, files (`fl`, `fi`, `fe`, `cfi`, `cfl`) another, objects (`ob`, `cob`) a third.
//! A recursion level suffix (`foo'2`, from `--separate-recs`) is folded into `foo`.
//!
//! Inclusive cost of a function = its self cost + the inclusive cost of its calls to other
//! functions (calls to itself are already inside its self cost and are not added again).
//!
//! ## Attribution
//!
//! [`operation_of`] maps the engine's non-inlined entry points to the 2008 paper's operations
//! (Figures 5 and 6); [`Component::of`] maps any demangled symbol, by crate and module path,
//! to the component it belongs to (Figure 8). Components are counted per cost line, by the
//! source file the line comes from when that file is a workspace or registry crate's
//! ([`Component::of_source`]: `fl=` for the function, `fi=`/`fe=` for code inlined into it),
//! else by the function's symbol: an inlined buffer-pool hit inside a B+-tree descent is
//! buffer-manager work wherever the compiler put it.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

/// A malformed callgrind file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("callgrind output line {line}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

/// The costs of one function in one profile (first event only, usually `Ir`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FunctionCost {
    pub self_cost: u64,
    /// Self cost plus the inclusive cost of calls to other functions.
    pub inclusive: u64,
    /// Times it was called (from callers inside the profile).
    pub calls: u64,
}

/// One parsed callgrind dump.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    pub events: Vec<String>,
    /// Demangled name → costs.
    pub functions: BTreeMap<String, FunctionCost>,
    /// `(caller, callee)` → (calls, inclusive cost of those calls).
    pub calls: BTreeMap<(String, String), (u64, u64)>,
    /// The sum of every function's self cost.
    pub total: u64,
    /// `totals:`/`summary:` as written in the file, if it was.
    pub stated_total: Option<u64>,
    /// `desc: Trigger: ...` (e.g. the client request that dumped it).
    pub trigger: Option<String>,
    /// Self cost per component, each cost line attributed by the source file it came from
    /// where that names a component (see [`Component::of_source`]), else by its function.
    pub components: BTreeMap<Component, u64>,
}

#[derive(Default)]
struct Names {
    by_id: HashMap<u64, String>,
}

impl Names {
    /// Resolves `(id) name`, `(id)` or a plain `name`.
    fn resolve(&mut self, text: &str, line: usize) -> Result<String, ParseError> {
        let text = text.trim();
        let Some(rest) = text.strip_prefix('(') else {
            return Ok(text.to_string());
        };
        let close = rest.find(')').ok_or_else(|| ParseError {
            line,
            message: format!("unclosed name id in '{text}'"),
        })?;
        let id: u64 = rest[..close].parse().map_err(|_| ParseError {
            line,
            message: format!("bad name id in '{text}'"),
        })?;
        let name = rest[close + 1..].trim();
        if name.is_empty() {
            self.by_id.get(&id).cloned().ok_or_else(|| ParseError {
                line,
                message: format!("name id ({id}) used before it was defined"),
            })
        } else {
            self.by_id.insert(id, name.to_string());
            Ok(name.to_string())
        }
    }
}

/// Folds `foo'2` (a recursion level) into `foo`.
fn base_name(name: &str) -> &str {
    match name.rfind('\'') {
        Some(at)
            if !name[at + 1..].is_empty() && name[at + 1..].bytes().all(|b| b.is_ascii_digit()) =>
        {
            &name[..at]
        }
        _ => name,
    }
}

impl Profile {
    /// Parses one callgrind output file's text.
    pub fn parse(text: &str) -> Result<Profile, ParseError> {
        let mut profile = Profile::default();
        let mut functions = Names::default();
        let mut files = Names::default();
        let mut objects = Names::default();
        let mut position_columns = 1usize;
        let mut current: Option<String> = None;
        let mut callee: Option<String> = None;
        // Set by a `calls=` line: the next cost line is that call's inclusive cost.
        let mut pending_call: Option<(String, u64)> = None;
        let mut self_costs: BTreeMap<String, u64> = BTreeMap::new();
        // The source file of the cost lines that follow (`fl=`, then `fi=`/`fe=` for inlined
        // code), and the component it names, if it names one.
        let mut file_component: Option<Component> = None;
        // The function's own file (`fl=`): a new `fn=` returns to it after inlined code.
        let mut fn_file_component: Option<Component> = None;

        for (index, raw) in text.lines().enumerate() {
            let line_no = index + 1;
            let line = raw.trim_end();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let first = line.as_bytes()[0];
            if first.is_ascii_digit() || matches!(first, b'+' | b'-' | b'*') {
                let cost = cost_of(line, position_columns, line_no)?;
                if let Some((target, count)) = pending_call.take() {
                    let caller = current.clone().ok_or_else(|| ParseError {
                        line: line_no,
                        message: "call cost outside any fn".into(),
                    })?;
                    let entry = profile.calls.entry((caller, target)).or_insert((0, 0));
                    entry.0 += count;
                    entry.1 += cost;
                } else {
                    let name = current.clone().ok_or_else(|| ParseError {
                        line: line_no,
                        message: "cost line before any fn=".into(),
                    })?;
                    let component = file_component.unwrap_or_else(|| Component::of(&name));
                    *profile.components.entry(component).or_insert(0) += cost;
                    *self_costs.entry(name).or_insert(0) += cost;
                }
                continue;
            }
            let Some((key, value)) = line.split_once(['=', ':']) else {
                return Err(ParseError {
                    line: line_no,
                    message: format!("unrecognised line '{line}'"),
                });
            };
            match key {
                "fn" => {
                    file_component = fn_file_component;
                    let name = functions.resolve(value, line_no)?;
                    current = Some(base_name(&name).to_string());
                    self_costs.entry(base_name(&name).to_string()).or_insert(0);
                }
                "cfn" => {
                    let name = functions.resolve(value, line_no)?;
                    callee = Some(base_name(&name).to_string());
                }
                "calls" => {
                    let count = value
                        .split_whitespace()
                        .next()
                        .and_then(|c| c.parse::<u64>().ok())
                        .ok_or_else(|| ParseError {
                            line: line_no,
                            message: format!("bad call count in '{line}'"),
                        })?;
                    let target = callee.take().ok_or_else(|| ParseError {
                        line: line_no,
                        message: "calls= without a preceding cfn=".into(),
                    })?;
                    pending_call = Some((target, count));
                }
                "fl" => {
                    let file = files.resolve(value, line_no)?;
                    fn_file_component = Component::of_source(&file);
                    file_component = fn_file_component;
                }
                "fi" | "fe" => {
                    let file = files.resolve(value, line_no)?;
                    file_component = Component::of_source(&file);
                }
                "cfi" | "cfl" => {
                    files.resolve(value, line_no)?;
                }
                "ob" | "cob" => {
                    objects.resolve(value, line_no)?;
                }
                "events" => {
                    profile.events = value.split_whitespace().map(str::to_string).collect();
                }
                "positions" => {
                    position_columns = value.split_whitespace().count().max(1);
                }
                "totals" | "summary" => {
                    let t = value.split_whitespace().next().and_then(|v| v.parse().ok());
                    if profile.stated_total.is_none() || key == "totals" {
                        profile.stated_total = t;
                    }
                }
                "desc" => {
                    if let Some(trigger) = value.trim().strip_prefix("Trigger:") {
                        profile.trigger = Some(trigger.trim().to_string());
                    }
                }
                // Header lines and jump records carry nothing we use.
                _ => {}
            }
        }
        for (name, self_cost) in self_costs {
            profile.functions.insert(
                name,
                FunctionCost {
                    self_cost,
                    inclusive: self_cost,
                    calls: 0,
                },
            );
        }
        for ((caller, target), (count, cost)) in &profile.calls {
            if caller != target {
                profile
                    .functions
                    .entry(caller.clone())
                    .or_default()
                    .inclusive += cost;
            }
            profile.functions.entry(target.clone()).or_default().calls += count;
        }
        profile.total = profile.functions.values().map(|f| f.self_cost).sum();
        Ok(profile)
    }

    /// Reads and parses a file.
    pub fn read(path: &std::path::Path) -> anyhow::Result<Profile> {
        use anyhow::Context;
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("read callgrind output {}", path.display()))?;
        Profile::parse(&text).with_context(|| format!("parse {}", path.display()))
    }

    /// The summed costs of every function whose name satisfies `wanted`.
    pub fn matching(&self, wanted: impl Fn(&str) -> bool) -> FunctionCost {
        let mut sum = FunctionCost::default();
        for (name, cost) in &self.functions {
            if wanted(name) {
                sum.self_cost += cost.self_cost;
                sum.inclusive += cost.inclusive;
                sum.calls += cost.calls;
            }
        }
        sum
    }

    /// Self cost per component. Code the compiler inlined into a function of another
    /// component counts where its source lies: a buffer-pool hit inlined into a B+-tree
    /// descent is buffer manager, parking_lot's inlined latch is latching; `std` and `core`
    /// helpers (bounds checks, iterators) and libc count by the function they run in, as
    /// before.
    pub fn by_component(&self) -> BTreeMap<Component, u64> {
        self.components.clone()
    }

    /// Cost per operation (Figures 5 and 6): each entry point's inclusive cost, less what it
    /// spends in other entry points and in the procedure's own code;
    /// [`Operation::Procedure`] is the self cost of the procedure's functions (the workload's
    /// and the kernel's), and [`Operation::Other`] is the rest of the total: the `Tx` calls'
    /// own work outside the paper's operations (packing keys, encoding rows, the undo list,
    /// the session), and what runs outside any entry point.
    ///
    /// What an operation spends elsewhere is found through the functions it alone reaches:
    /// the calls from the entry point itself, or from a function reached (without crossing
    /// another entry point or procedure code) from this entry point and no other, into an
    /// entry point or into procedure code (`workloads`, `kernel`) are taken off it. So a
    /// read-modify-write's callback, which runs inside `stage_update` under the page latch,
    /// counts as the procedure's, and the update it computes there as "update record", not
    /// as "pin/unpin". A function several operations reach keeps its calls in each (the
    /// aggregated call graph cannot tell them apart).
    pub fn by_operation(&self) -> BTreeMap<Operation, u64> {
        let is_procedure = |name: &str| Component::of(name) == Component::UsefulWork;
        let boundary = |name: &str| operation_of(name).is_some() || is_procedure(name);
        let mut callees: HashMap<&str, Vec<&str>> = HashMap::new();
        for (caller, target) in self.calls.keys() {
            if caller != target {
                callees.entry(caller).or_default().push(target);
            }
        }
        // The operation that alone reaches each function (None: more than one does).
        let mut owner: HashMap<&str, Option<Operation>> = HashMap::new();
        let mut split: BTreeMap<Operation, u64> = BTreeMap::new();
        for (name, cost) in &self.functions {
            let Some(op) = operation_of(name) else {
                continue;
            };
            *split.entry(op).or_insert(0) += cost.inclusive;
            owner.insert(name, Some(op));
            let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
            let mut stack: Vec<&str> = vec![name];
            while let Some(f) = stack.pop() {
                for &g in callees.get(f).map(Vec::as_slice).unwrap_or(&[]) {
                    if boundary(g) || !seen.insert(g) {
                        continue;
                    }
                    owner
                        .entry(g)
                        .and_modify(|o| {
                            if *o != Some(op) {
                                *o = None;
                            }
                        })
                        .or_insert(Some(op));
                    stack.push(g);
                }
            }
        }
        for ((caller, target), (_, cost)) in &self.calls {
            if caller == target || !boundary(target) {
                continue;
            }
            if let Some(Some(op)) = owner.get(caller.as_str()) {
                let e = split.entry(*op).or_insert(0);
                *e = e.saturating_sub(*cost);
            }
        }
        // The procedure's own code: what runs in its functions, inlined code included (a
        // `RowRef` read, a row of `Value`s built); never inside an operation's share, since
        // every call into procedure code is taken off the operation that made it.
        let procedure: u64 = self
            .functions
            .iter()
            .filter(|(name, _)| is_procedure(name))
            .map(|(_, cost)| cost.self_cost)
            .sum();
        split.insert(Operation::Procedure, procedure);
        let named: u64 = split.values().sum();
        split.insert(Operation::Other, self.total.saturating_sub(named));
        split
    }
}

fn cost_of(line: &str, position_columns: usize, line_no: usize) -> Result<u64, ParseError> {
    let mut fields = line.split_whitespace().skip(position_columns);
    match fields.next() {
        None => Ok(0),
        Some(first) => first.parse::<u64>().map_err(|_| ParseError {
            line: line_no,
            message: format!("bad cost '{first}' in '{line}'"),
        }),
    }
}

/// The 2008 paper's per-operation breakdown (Figures 5 and 6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Operation {
    Begin,
    BtreeLookup,
    PinUnpin,
    UpdateRecord,
    CreateRecord,
    InsertIndex,
    Commit,
    /// The procedures' prefetch hints (`Tx::prefetch` and its kin): not one of the paper's
    /// operations, so named apart.
    Prefetch,
    /// The procedure's own code (not one of the paper's operations either).
    Procedure,
    Other,
}

impl Operation {
    pub const ALL: [Operation; 10] = [
        Operation::Begin,
        Operation::BtreeLookup,
        Operation::PinUnpin,
        Operation::UpdateRecord,
        Operation::CreateRecord,
        Operation::InsertIndex,
        Operation::Commit,
        Operation::Prefetch,
        Operation::Procedure,
        Operation::Other,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Operation::Begin => "begin",
            Operation::BtreeLookup => "btree lookup",
            Operation::PinUnpin => "pin/unpin",
            Operation::UpdateRecord => "update record",
            Operation::CreateRecord => "create record",
            Operation::InsertIndex => "insert index",
            Operation::Commit => "commit",
            Operation::Prefetch => "prefetch hints",
            Operation::Procedure => "procedure",
            Operation::Other => "other",
        }
    }
}

/// The operation whose entry point `symbol` is (the engine's `#[inline(never)]` functions).
pub fn operation_of(symbol: &str) -> Option<Operation> {
    let s = strip_hash(symbol);
    Some(match s {
        "engine::txn::Transaction::begin" | "engine::db::Database::begin" => Operation::Begin,
        "engine::txn::Transaction::commit" => Operation::Commit,
        "engine::table::IndexStore::get" => Operation::BtreeLookup,
        // A read's record, and an update's, fixed and latched (an update's exclusively, to
        // be read and written under that one latch).
        "engine::table::Records::with" | "engine::table::Records::fix_for_update" => {
            Operation::PinUnpin
        }
        // The new image and the before image, computed under the page latch
        // (`stage_update`), then written and the latch released (in place, word by word, on
        // the main-memory store without a log).
        "engine::table::Records::write_pieces"
        | "engine::table::RecordForUpdate::write_pieces"
        | "engine::table::Records::write_words"
        | "engine::txn::Transaction::stage_update" => Operation::UpdateRecord,
        "engine::table::Records::insert" => Operation::CreateRecord,
        // Under record locking an index insert also try-locks its next key, in the same
        // descent (`insert_with_next`); without it a transaction's inserts go through its
        // leaf hints (`insert_hinted`).
        "engine::table::IndexStore::insert"
        | "engine::table::IndexStore::insert_with_next"
        | "engine::table::IndexStore::insert_hinted" => Operation::InsertIndex,
        "<engine::txn::Transaction as engine::api::Tx>::prefetch"
        | "<engine::txn::Transaction as engine::api::Tx>::prefetch_columns"
        | "<engine::txn::Transaction as engine::api::Tx>::prefetch_for_update"
        | "<engine::txn::Transaction as engine::api::Tx>::prefetch_inserts" => Operation::Prefetch,
        _ => return None,
    })
}

/// Drops a legacy-mangling hash suffix (`::h0123456789abcdef`) if the demangler kept it.
fn strip_hash(symbol: &str) -> &str {
    match symbol.rfind("::h") {
        Some(at)
            if symbol.len() - at == 19
                && symbol[at + 3..].bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            &symbol[..at]
        }
        _ => symbol,
    }
}

/// Where an instruction is spent (Figure 8), decided by the symbol's crate and module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Component {
    BufferManager,
    Index,
    Records,
    Latching,
    Locking,
    Logging,
    KeysAndRecords,
    TransactionEngine,
    UsefulWork,
    Runtime,
    Other,
}

impl Component {
    pub const ALL: [Component; 11] = [
        Component::BufferManager,
        Component::Index,
        Component::Records,
        Component::Latching,
        Component::Locking,
        Component::Logging,
        Component::KeysAndRecords,
        Component::TransactionEngine,
        Component::UsefulWork,
        Component::Runtime,
        Component::Other,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Component::BufferManager => "buffer manager",
            Component::Index => "B-tree/index",
            Component::Records => "records",
            Component::Latching => "latching",
            Component::Locking => "locking",
            Component::Logging => "logging",
            Component::KeysAndRecords => "key and record code",
            Component::TransactionEngine => "transaction/engine",
            Component::UsefulWork => "useful work",
            Component::Runtime => "runtime (malloc, memcpy, std)",
            Component::Other => "other",
        }
    }

    /// The component of a demangled symbol. `<A as B>::f` belongs to A's path;
    /// `core::ptr::drop_in_place<T>` to T's (dropping a glass type is that type's code).
    pub fn of(symbol: &str) -> Component {
        let s = strip_hash(symbol.trim());
        let s = s.strip_prefix('<').unwrap_or(s);
        if let Some(inner) = s.strip_prefix("core::ptr::drop_in_place<") {
            // The first glass path inside the dropped type decides (`[engine::value::Value; 8]`,
            // `alloc::vec::Vec<workloads::...>`); a type of std alone is runtime.
            let glass = GLASS_CRATES
                .iter()
                .filter_map(|c| find_path(inner, c))
                .min();
            if let Some(at) = glass {
                return Component::of_path(&inner[at..]);
            }
        }
        Component::of_path(s)
    }

    /// The component a source file belongs to, if its path says: a workspace crate's file
    /// (`…/crates/storage/src/buffer/pool.rs` → `storage::buffer`) or a registry crate's
    /// (`…/registry/src/<index>/parking_lot-0.12.5/src/raw_rwlock.rs` → `parking_lot`).
    /// `None` for the standard library, libc and anything unknown: those count by function.
    pub fn of_source(file: &str) -> Option<Component> {
        let (krate, rest) = if let Some(at) = file.rfind("/crates/") {
            file[at + "/crates/".len()..].split_once("/src/")?
        } else if let Some(at) = file.find("/registry/src/") {
            // `<index dir>/<name>-<version>/src/...`
            let (_, after_index) = file[at + "/registry/src/".len()..].split_once('/')?;
            after_index.split_once("/src/")?
        } else {
            return None;
        };
        // A registry directory is `name-version`; crate names use `_` in paths.
        let krate = match krate.rsplit_once('-') {
            Some((name, version)) if version.starts_with(|c: char| c.is_ascii_digit()) => name,
            _ => krate,
        }
        .replace('-', "_");
        let module = rest.split(['/', '.']).next().unwrap_or("");
        match Component::of_path(&format!("{krate}::{module}")) {
            Component::Other => None,
            component => Some(component),
        }
    }

    fn of_path(path: &str) -> Component {
        let path = path.strip_prefix('&').unwrap_or(path);
        let mut segments = path.split("::");
        let krate = segments.next().unwrap_or("");
        let module = segments.next().unwrap_or("");
        let module = module.split(['<', ' ', '{']).next().unwrap_or("");
        match krate {
            "storage" => match module {
                "buffer" | "page" | "file" | "device" | "counters" => Component::BufferManager,
                "btree" | "memindex" | "hash" | "int_hash" | "dense_map" => Component::Index,
                "heap" | "memstore" => Component::Records,
                "latch" => Component::Latching,
                _ => Component::Other,
            },
            "parking_lot" | "parking_lot_core" | "lock_api" => Component::Latching,
            "txn" => Component::Locking,
            "wal" => Component::Logging,
            // Page checksums (the log has its own CRC-32C in `wal::checksum`).
            "crc32fast" => Component::BufferManager,
            "engine" => match module {
                "keys" | "record" | "value" | "schema" => Component::KeysAndRecords,
                _ => Component::TransactionEngine,
            },
            "workloads" | "kernel" => Component::UsefulWork,
            "std" | "alloc" | "core" | "hashbrown" | "compiler_builtins" | "__rustc" => {
                Component::Runtime
            }
            _ if is_libc(path) => Component::Runtime,
            _ => Component::Other,
        }
    }
}

const GLASS_CRATES: [&str; 6] = [
    "storage::",
    "wal::",
    "txn::",
    "engine::",
    "workloads::",
    "kernel::",
];

/// Where `krate` (`"engine::"`) starts a path in `text` (not inside another name).
fn find_path(text: &str, krate: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(found) = text[from..].find(krate) {
        let at = from + found;
        let before = text[..at].chars().next_back();
        if !matches!(before, Some(c) if c.is_alphanumeric() || c == '_' || c == ':') {
            return Some(at);
        }
        from = at + krate.len();
    }
    None
}

/// C library and allocator symbols (glibc's `memcpy` variants, `malloc`, `_int_free`, ...).
fn is_libc(name: &str) -> bool {
    let n = name.trim_start_matches('_');
    [
        "mem",
        "malloc",
        "int_malloc",
        "int_free",
        "free",
        "calloc",
        "realloc",
        "str",
        "libc_",
        "pthread",
        "tcache",
        "unlink_chunk",
        "clock_gettime",
        "bcmp",
        "dl_",
        "alloc_perturb",
        "round",
    ]
    .iter()
    .any(|p| n.starts_with(p))
}

/// Valgrind client requests (x86-64): a special no-op instruction sequence that valgrind
/// recognises and a native run executes as nothing (the request's default answer comes back).
pub mod client {
    const CALLGRIND_BASE: usize = ((b'C' as usize) << 24) | ((b'T' as usize) << 16);
    const DUMP_STATS_AT: usize = CALLGRIND_BASE + 3;
    const START_INSTRUMENTATION: usize = CALLGRIND_BASE + 4;
    const STOP_INSTRUMENTATION: usize = CALLGRIND_BASE + 5;
    const RUNNING_ON_VALGRIND: usize = 0x1001;

    #[cfg(target_arch = "x86_64")]
    fn request(default: usize, args: [usize; 6]) -> usize {
        let result: usize;
        // SAFETY: the sequence rotates rdi by 128 bits in all (leaving it unchanged) and
        // exchanges rbx with itself: natively it changes no register but flags; valgrind
        // reads the six words at rax and writes its answer to rdx. `args` outlives the asm.
        unsafe {
            std::arch::asm!(
                "rol rdi, 3",
                "rol rdi, 13",
                "rol rdi, 61",
                "rol rdi, 51",
                "xchg rbx, rbx",
                inout("rdx") default => result,
                in("rax") args.as_ptr(),
                inout("rdi") 0usize => _,
                options(nostack),
            );
        }
        result
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn request(default: usize, _args: [usize; 6]) -> usize {
        default
    }

    /// True when running under valgrind.
    pub fn running_on_valgrind() -> bool {
        request(0, [RUNNING_ON_VALGRIND, 0, 0, 0, 0, 0]) != 0
    }

    /// Starts instrumenting (for `--instr-atstart=no`).
    pub fn start_instrumentation() {
        request(0, [START_INSTRUMENTATION, 0, 0, 0, 0, 0]);
    }

    /// Stops instrumenting.
    pub fn stop_instrumentation() {
        request(0, [STOP_INSTRUMENTATION, 0, 0, 0, 0, 0]);
    }

    /// Writes the costs collected so far as one dump (`OUT.1`, `OUT.2`, ...) whose trigger
    /// names `label`, and zeroes them.
    pub fn dump_stats_at(label: &str) {
        let mut text: Vec<u8> = label.bytes().filter(|b| *b != 0).collect();
        text.push(0);
        request(0, [DUMP_STATS_AT, text.as_ptr() as usize, 0, 0, 0, 0]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = "\
version: 1
creator: callgrind-3.19.0
positions: line
events: Ir
summary: 1000

ob=(1) /glass
fl=(1) src/txn.rs
fn=(1) bench::ladder::measure::measured_txn
10 50
cfn=(2) engine::txn::Transaction::begin
calls=1 20
11 100
cfn=(3) engine::txn::Transaction::commit
calls=1 30
+1 250
cfn=(4) <engine::txn::Transaction as engine::api::Tx>::get
calls=2 40
* 600

fn=(2)
20 60
cfn=(5) __memcpy_avx_unaligned_erms
calls=1 0
21 40

fn=(3)
30 250

fn=(4)
40 200
cfn=(6) engine::table::IndexStore::get
calls=2 0
41 400

fn=(6)
0 300
cfn=(6)
calls=1 0
0 70
cfn=(7) storage::btree::tree::BTree::get'2
calls=3 0
0 100

fn=(7) storage::btree::tree::BTree::get
0 60
fn=(7)
0 40

fn=(5)
0 40
totals: 1000
";

    #[test]
    fn parses_self_inclusive_and_calls() {
        let p = Profile::parse(SMALL).unwrap();
        assert_eq!(p.events, vec!["Ir"]);
        assert_eq!(p.stated_total, Some(1000));
        assert_eq!(p.total, 50 + 60 + 250 + 200 + 300 + 100 + 40);
        let m = &p.functions["bench::ladder::measure::measured_txn"];
        assert_eq!(m.self_cost, 50);
        assert_eq!(m.inclusive, 50 + 100 + 250 + 600);
        let begin = &p.functions["engine::txn::Transaction::begin"];
        assert_eq!(
            (begin.self_cost, begin.inclusive, begin.calls),
            (60, 100, 1)
        );
        // A recursive call is not added to the inclusive cost a second time.
        let get = &p.functions["engine::table::IndexStore::get"];
        assert_eq!((get.self_cost, get.inclusive, get.calls), (300, 400, 3));
        // 'N recursion levels fold into the base name; id (7) named with the suffix.
        let tree = &p.functions["storage::btree::tree::BTree::get"];
        assert_eq!(tree.self_cost, 100);
        assert_eq!(tree.calls, 3);
        assert_eq!(p.functions["__memcpy_avx_unaligned_erms"].calls, 1);
    }

    #[test]
    fn operation_split_sums_to_the_total() {
        let p = Profile::parse(SMALL).unwrap();
        let ops = p.by_operation();
        assert_eq!(ops[&Operation::Begin], 100);
        assert_eq!(ops[&Operation::Commit], 250);
        assert_eq!(ops[&Operation::BtreeLookup], 400);
        assert_eq!(ops.values().sum::<u64>(), p.total);
        assert_eq!(ops[&Operation::Other], p.total - 750);
    }

    #[test]
    fn component_split_sums_to_the_total() {
        let p = Profile::parse(SMALL).unwrap();
        let c = p.by_component();
        assert_eq!(c.values().sum::<u64>(), p.total);
        assert_eq!(c[&Component::Runtime], 40);
        assert_eq!(c[&Component::Index], 100);
        assert_eq!(c[&Component::TransactionEngine], 60 + 250 + 200 + 300);
        assert_eq!(c[&Component::Other], 50);
    }

    #[test]
    fn callbacks_inside_an_operation_count_as_the_procedure_and_nested_operations() {
        // Records::with (pin/unpin) → HeapFile::with_record → the update closure (update
        // record) → the procedure's callback; and a read callback straight from with_record.
        let text = "\
events: Ir
fn=(1) engine::table::Records::with
0 10
cfn=(2) storage::heap::file::HeapFile::with_record
calls=2 0
0 100
fn=(2)
0 20
cfn=(3) engine::txn::Transaction::stage_update
calls=1 0
0 50
cfn=(4) workloads::tpcc::new_order::get_item::{{closure}}
calls=1 0
0 30
fn=(3)
0 30
cfn=(5) workloads::tpcc::new_order::order_line::{{closure}}
calls=1 0
0 20
fn=(4)
0 30
fn=(5)
0 20
";
        let p = Profile::parse(text).unwrap();
        let ops = p.by_operation();
        assert_eq!(ops[&Operation::PinUnpin], 10 + 20);
        assert_eq!(ops[&Operation::UpdateRecord], 30);
        assert_eq!(ops[&Operation::Procedure], 30 + 20);
        assert_eq!(ops[&Operation::Other], 0);
        assert_eq!(ops.values().sum::<u64>(), p.total);
    }

    #[test]
    fn inlined_code_counts_where_its_source_lies() {
        // A B+-tree descent with a buffer-pool hit and a parking_lot latch inlined into it,
        // a core bounds check (counts as the function), then the function's own lines again.
        let text = "\
events: Ir
fl=(1) /work/main/crates/storage/src/btree/tree.rs
fn=(1) storage::btree::tree::BTree<K>::descend_shared
1 100
fi=(2) /work/main/crates/storage/src/buffer/pool.rs
2 30
fi=(3) /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/parking_lot-0.12.5/src/raw_rwlock.rs
3 7
fi=(4) /rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/core/src/slice/index.rs
4 5
fe=(1)
5 11
fl=(5) /work/main/crates/workloads/src/tpcc/new_order.rs
fn=(2) workloads::tpcc::new_order::new_order
6 40
fi=(6) /work/main/crates/engine/src/record.rs
7 9
";
        let p = Profile::parse(text).unwrap();
        let c = p.by_component();
        assert_eq!(c[&Component::Index], 100 + 5 + 11);
        assert_eq!(c[&Component::BufferManager], 30);
        assert_eq!(c[&Component::Latching], 7);
        assert_eq!(c[&Component::UsefulWork], 40);
        assert_eq!(c[&Component::KeysAndRecords], 9);
        assert_eq!(c.values().sum::<u64>(), p.total);
        // The function's own cost is unchanged: attribution by file is for components only.
        assert_eq!(
            p.functions["storage::btree::tree::BTree<K>::descend_shared"].self_cost,
            153
        );
    }

    #[test]
    fn source_files_name_components() {
        let of = Component::of_source;
        assert_eq!(
            of("/work/main/crates/storage/src/heap/page.rs"),
            Some(Component::Records)
        );
        assert_eq!(
            of("/x/crates/engine/src/txn.rs"),
            Some(Component::TransactionEngine)
        );
        assert_eq!(
            of("/x/crates/kernel/src/lib.rs"),
            Some(Component::UsefulWork)
        );
        assert_eq!(
            of("/root/.cargo/registry/src/index.crates.io-1/lock_api-0.4.14/src/rwlock.rs"),
            Some(Component::Latching)
        );
        // Unmapped crates, std and libc count by the function they run in.
        assert_eq!(
            of("/root/.cargo/registry/src/i/rustc-hash-2.1.3/src/lib.rs"),
            None
        );
        assert_eq!(of("/rustc/abc/library/core/src/slice/index.rs"), None);
        assert_eq!(of("./string/../sysdeps/x86_64/multiarch/memmove.S"), None);
        assert_eq!(of("src/txn.rs"), None);
    }

    #[test]
    fn errors_name_the_line() {
        let e = Profile::parse("events: Ir\nfn=(1) a\n10 x\n").unwrap_err();
        assert_eq!(e.line, 3);
        let e = Profile::parse("events: Ir\nfn=(9)\n").unwrap_err();
        assert!(e.message.contains("(9)"), "{e}");
        let e = Profile::parse("events: Ir\n10 5\n").unwrap_err();
        assert_eq!(e.line, 2);
        let e = Profile::parse("events: Ir\nfn=a\ncalls=1 2\n").unwrap_err();
        assert!(e.message.contains("cfn"), "{e}");
    }

    #[test]
    fn positions_with_two_columns_and_missing_costs() {
        let text = "positions: instr line\nevents: Ir Dr\nfn=f\n0x10 3 7 2\n+4 * 5\n+2 1\n";
        let p = Profile::parse(text).unwrap();
        assert_eq!(p.functions["f"].self_cost, 12);
    }

    #[test]
    fn operations_of_real_entry_points() {
        assert_eq!(
            operation_of("engine::txn::Transaction::begin"),
            Some(Operation::Begin)
        );
        assert_eq!(
            operation_of("engine::table::Records::with::h0123456789abcdef"),
            Some(Operation::PinUnpin)
        );
        assert_eq!(
            operation_of("engine::table::IndexStore::insert"),
            Some(Operation::InsertIndex)
        );
        assert_eq!(
            operation_of("engine::table::IndexStore::insert_with_next"),
            Some(Operation::InsertIndex)
        );
        assert_eq!(
            operation_of("engine::table::IndexStore::insert_hinted"),
            Some(Operation::InsertIndex)
        );
        assert_eq!(
            operation_of("engine::table::Records::write_pieces"),
            Some(Operation::UpdateRecord)
        );
        assert_eq!(
            operation_of("engine::table::Records::write_words"),
            Some(Operation::UpdateRecord)
        );
        assert_eq!(
            operation_of("engine::table::Records::fix_for_update"),
            Some(Operation::PinUnpin)
        );
        assert_eq!(
            operation_of("engine::table::RecordForUpdate::write_pieces"),
            Some(Operation::UpdateRecord)
        );
        assert_eq!(
            operation_of("engine::txn::Transaction::stage_update"),
            Some(Operation::UpdateRecord)
        );
        assert_eq!(
            operation_of("engine::table::Records::with::{{closure}}"),
            None
        );
        assert_eq!(operation_of("engine::txn::Transaction::abort"), None);
        for hint in [
            "prefetch",
            "prefetch_columns",
            "prefetch_for_update",
            "prefetch_inserts",
        ] {
            assert_eq!(
                operation_of(&format!(
                    "<engine::txn::Transaction as engine::api::Tx>::{hint}::h0123456789abcdef"
                )),
                Some(Operation::Prefetch),
                "{hint}"
            );
        }
        assert_eq!(
            operation_of("engine::txn::Transaction::prefetch_found"),
            None
        );
    }

    #[test]
    fn hints_and_the_procedure_are_named_and_other_is_the_api_rest() {
        // The procedure (self 40) calls a hint (self 10, which probes through a helper of
        // its own, 25), a read (`read_with`, self 30: not an operation) that looks up an
        // index (50) and runs the procedure's callback (15), and the runtime (5).
        let text = "\
events: Ir
fn=(1) workloads::tpcc::new_order::new_order
0 40
cfn=(2) <engine::txn::Transaction as engine::api::Tx>::prefetch_columns
calls=1 0
0 35
cfn=(4) <engine::txn::Transaction as engine::api::Tx>::read_with
calls=1 0
0 95
cfn=(7) malloc
calls=1 0
0 5
fn=(2)
0 10
cfn=(3) engine::txn::Transaction::prefetch_found
calls=1 0
0 25
fn=(3)
0 25
fn=(4)
0 30
cfn=(5) engine::table::IndexStore::get
calls=1 0
0 50
cfn=(6) workloads::tpcc::new_order::get_item::{{closure}}
calls=1 0
0 15
fn=(5)
0 50
fn=(6)
0 15
fn=(7)
0 5
";
        let p = Profile::parse(text).unwrap();
        let ops = p.by_operation();
        assert_eq!(ops[&Operation::Prefetch], 10 + 25);
        assert_eq!(ops[&Operation::BtreeLookup], 50);
        assert_eq!(ops[&Operation::Procedure], 40 + 15);
        assert_eq!(ops[&Operation::Other], 30 + 5);
        assert_eq!(ops.values().sum::<u64>(), p.total);
    }

    #[test]
    fn components_of_real_demangled_names() {
        let cases = [
            (
                "storage::buffer::pool::BufferPool::fix",
                Component::BufferManager,
            ),
            ("storage::btree::node::search_generic", Component::Index),
            ("storage::memindex::MemIndex::get", Component::Index),
            ("storage::int_hash::IntHash::get", Component::Index),
            ("storage::dense_map::DenseMap::insert_new", Component::Index),
            (
                "storage::heap::file::HeapFile::with_record",
                Component::Records,
            ),
            ("storage::memstore::MemStore::insert", Component::Records),
            ("storage::latch::Latch::lock_shared", Component::Latching),
            (
                "parking_lot::raw_rwlock::RawRwLock::lock_shared_slow",
                Component::Latching,
            ),
            ("lock_api::mutex::Mutex<R,T>::lock", Component::Latching),
            ("txn::lock::manager::LockManager::lock", Component::Locking),
            ("txn::cc::two_pl::TwoPhaseLocking::read", Component::Locking),
            ("wal::log::LogManager::append", Component::Logging),
            ("wal::checksum::x86::append", Component::Logging),
            (
                "crc32fast::specialized::pclmulqdq::calculate",
                Component::BufferManager,
            ),
            ("engine::keys::encode_key", Component::KeysAndRecords),
            ("engine::record::Layout::decode", Component::KeysAndRecords),
            (
                "engine::txn::Transaction::commit",
                Component::TransactionEngine,
            ),
            (
                "<engine::txn::Transaction as engine::api::Tx>::get",
                Component::TransactionEngine,
            ),
            ("engine::db::Database::table", Component::TransactionEngine),
            (
                "workloads::tpcc::new_order::new_order",
                Component::UsefulWork,
            ),
            (
                "kernel::payment::<impl kernel::kernel::Kernel>::payment",
                Component::UsefulWork,
            ),
            ("<kernel::kernel::Kernel>::run_mix", Component::UsefulWork),
            ("alloc::raw_vec::RawVec<T,A>::grow_one", Component::Runtime),
            ("core::fmt::write", Component::Runtime),
            (
                "hashbrown::raw::RawTable<T,A>::reserve_rehash",
                Component::Runtime,
            ),
            (
                "core::ptr::drop_in_place<engine::txn::Session>",
                Component::TransactionEngine,
            ),
            (
                "core::ptr::drop_in_place<alloc::vec::Vec<u8>>",
                Component::Runtime,
            ),
            (
                "core::ptr::drop_in_place<[engine::value::Value; 8]>",
                Component::KeysAndRecords,
            ),
            (
                "core::ptr::drop_in_place<alloc::vec::Vec<workloads::tpcc::new_order::ItemRow>>",
                Component::UsefulWork,
            ),
            (
                "core::ptr::drop_in_place<core::option::Option<txn::lock::manager::TxnLocks>>",
                Component::Locking,
            ),
            ("__rustc::__rdl_alloc", Component::Runtime),
            (
                "<wal::storage::MemLogStorage as wal::storage::LogStorage>::sync",
                Component::Logging,
            ),
            (
                "<storage::btree::keys::SchemaKeyOrder as storage::btree::keys::KeyOrder>::compare",
                Component::Index,
            ),
            ("__memcpy_avx_unaligned_erms", Component::Runtime),
            ("malloc", Component::Runtime),
            ("_int_free", Component::Runtime),
            ("0x0000000000123456", Component::Other),
            ("bench::ladder::measure::measured_txn", Component::Other),
        ];
        for (name, want) in cases {
            assert_eq!(Component::of(name), want, "{name}");
        }
    }
}
