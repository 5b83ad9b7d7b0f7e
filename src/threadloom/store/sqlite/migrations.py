"""The numbered migrations of the SQLite store, as SQL text (applied by ``schema.migrate``).

Partial indexes repeat their predicates literally in the queries that use them, because
SQLite only picks a partial index when the query's WHERE clause implies it.
"""

from __future__ import annotations

from threadloom.store.sqlite.search_index import MIGRATION_27 as SEARCH_BACKLOG
from threadloom.store.sqlite.search_index import SQL as SEARCH_INDEX

MIGRATIONS: list[tuple[int, str, str]] = [
    (
        1,
        "threads, messages, queue, logs, registry, events",
        """
CREATE TABLE threads (
    id                    TEXT PRIMARY KEY,
    agent_id              TEXT NOT NULL,
    origin_agent_id       TEXT NOT NULL,
    user_id               TEXT,
    tags                  TEXT NOT NULL DEFAULT '[]',
    parent_id             TEXT REFERENCES threads(id) ON DELETE CASCADE,
    arguments             TEXT,
    created_at_us         INTEGER NOT NULL,
    terminated            INTEGER,
    status_state          TEXT NOT NULL CHECK (status_state IN ('idle','running','failed')),
    status_since          INTEGER NOT NULL,
    status_reason         TEXT,
    msg_seq               INTEGER NOT NULL DEFAULT 0,
    clock_us              INTEGER NOT NULL DEFAULT 0,
    queue_seq             INTEGER NOT NULL DEFAULT 0,
    event_seq             INTEGER NOT NULL DEFAULT 0,
    log_seq               INTEGER NOT NULL DEFAULT 0,
    events_pruned_through INTEGER NOT NULL DEFAULT 0,
    stopped               INTEGER NOT NULL DEFAULT 0,
    session_turns_a       INTEGER NOT NULL DEFAULT 0,
    session_turns_b       INTEGER NOT NULL DEFAULT 0,
    overlap               TEXT
);
CREATE INDEX threads_user ON threads(user_id, created_at_us);
CREATE INDEX threads_parent ON threads(parent_id);
CREATE INDEX threads_agent ON threads(agent_id);
CREATE INDEX threads_created ON threads(created_at_us);

CREATE TABLE messages (
    id                    TEXT PRIMARY KEY,
    thread_id             TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    seq                   INTEGER NOT NULL,
    role                  TEXT NOT NULL CHECK (role IN ('system','user','assistant','tool')),
    content               TEXT,
    name                  TEXT,
    tool_calls            TEXT,
    tool_call_id          TEXT,
    tool_status           TEXT CHECK (tool_status IN ('success','error')),
    status                TEXT NOT NULL CHECK (status IN ('pending','completed','failed')),
    attachments           TEXT,
    reasoning_content     TEXT,
    reasoning_details     TEXT,
    prompt                TEXT,
    created_at            INTEGER NOT NULL,
    parent_id             TEXT,
    depth                 INTEGER NOT NULL DEFAULT 0,
    silent                INTEGER NOT NULL DEFAULT 0,
    metadata              TEXT,
    subagent_id           TEXT,
    log_id                TEXT,
    request_sent_at       INTEGER,
    response_completed_at INTEGER,
    UNIQUE (thread_id, seq)
);
CREATE INDEX messages_top ON messages(thread_id, seq) WHERE depth = 0;
CREATE INDEX messages_top_visible ON messages(thread_id, seq) WHERE depth = 0 AND silent = 0;
CREATE INDEX messages_tool_call ON messages(thread_id, tool_call_id)
    WHERE tool_call_id IS NOT NULL;
CREATE INDEX messages_parent ON messages(thread_id, parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX messages_subagent ON messages(thread_id, subagent_id, seq)
    WHERE subagent_id IS NOT NULL;
CREATE INDEX messages_log ON messages(log_id) WHERE log_id IS NOT NULL;

CREATE TABLE message_counts (
    thread_id TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    depth     INTEGER NOT NULL,
    silent    INTEGER NOT NULL,
    count     INTEGER NOT NULL,
    PRIMARY KEY (thread_id, depth, silent)
) WITHOUT ROWID;

CREATE TABLE tool_calls (
    thread_id  TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    id         TEXT NOT NULL,
    message_id TEXT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    arguments  TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (thread_id, id)
) WITHOUT ROWID;
CREATE INDEX tool_calls_message ON tool_calls(message_id);

CREATE TABLE message_queue (
    id          TEXT PRIMARY KEY,
    thread_id   TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    qseq        INTEGER NOT NULL,
    role        TEXT NOT NULL CHECK (role IN ('user','assistant','system')),
    content     TEXT NOT NULL,
    attachments TEXT,
    silent      INTEGER NOT NULL DEFAULT 0,
    metadata    TEXT,
    source      TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    UNIQUE (thread_id, qseq)
);

CREATE TABLE logs (
    id                          TEXT PRIMARY KEY,
    thread_id                   TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    message_id                  TEXT REFERENCES messages(id) ON DELETE SET NULL,
    lseq                        INTEGER NOT NULL,
    kind                        TEXT,
    provider                    TEXT NOT NULL,
    model                       TEXT NOT NULL,
    created_at                  INTEGER NOT NULL,
    is_complete                 INTEGER NOT NULL,
    error                       TEXT,
    error_type                  TEXT,
    error_origin                TEXT,
    endpoint                    TEXT,
    model_name                  TEXT,
    actual_provider             TEXT,
    standard_agents_router_used INTEGER,
    prompt_name                 TEXT,
    parent_log_id               TEXT,
    retry_of_log_id             TEXT,
    request_headers             TEXT,
    response_headers            TEXT,
    status_code                 INTEGER,
    input_tokens                INTEGER,
    cached_tokens               INTEGER,
    output_tokens               INTEGER,
    reasoning_tokens            INTEGER,
    total_tokens                INTEGER,
    latency_ms                  INTEGER,
    time_to_first_token_ms      INTEGER,
    generation_ms               INTEGER,
    finish_reason               TEXT,
    errors                      TEXT,
    cost_input                  REAL,
    cost_cached                 REAL,
    cost_output                 REAL,
    cost_router_fee             REAL,
    router_fee_percent          REAL,
    cost_total                  REAL,
    message_history_length      INTEGER,
    tools_available             INTEGER,
    tools_called                TEXT,
    tools_schema                TEXT,
    system_prompt               TEXT,
    reasoning_content           TEXT,
    tool_results                TEXT,
    provider_tools              TEXT,
    queued_tools                TEXT,
    app_level                   TEXT,
    app_message                 TEXT,
    app_status                  TEXT,
    app_error                   TEXT,
    app_duration_ms             REAL,
    app_cost                    REAL,
    app_request                 TEXT,
    app_response                TEXT,
    app_trigger                 TEXT,
    app_data                    TEXT
);
CREATE INDEX logs_order ON logs(thread_id, created_at, lseq);

CREATE TABLE log_bodies (
    log_id TEXT NOT NULL REFERENCES logs(id) ON DELETE CASCADE,
    part   TEXT NOT NULL CHECK (part IN ('request', 'response')),
    body   TEXT NOT NULL,
    PRIMARY KEY (log_id, part)
) WITHOUT ROWID;
CREATE INDEX logs_message ON logs(message_id);
CREATE INDEX logs_incomplete ON logs(thread_id) WHERE is_complete = 0;
CREATE INDEX logs_parent ON logs(parent_log_id) WHERE parent_log_id IS NOT NULL;
CREATE INDEX logs_retry ON logs(retry_of_log_id) WHERE retry_of_log_id IS NOT NULL;
CREATE INDEX logs_kind ON logs(thread_id, kind);

CREATE TABLE subagent_registry (
    parent_thread_id     TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    reference            TEXT NOT NULL,
    relationship         TEXT NOT NULL,
    owner                TEXT NOT NULL CHECK (owner IN ('a','b')),
    name                 TEXT NOT NULL,
    title                TEXT,
    description          TEXT,
    blocking             INTEGER NOT NULL,
    resumable            INTEGER NOT NULL,
    parent_communication TEXT NOT NULL,
    status               TEXT NOT NULL,
    initial_arguments    TEXT,
    thread_name          TEXT,
    spawn_group_id       TEXT,
    created_at           INTEGER NOT NULL,
    PRIMARY KEY (parent_thread_id, reference)
) WITHOUT ROWID;

CREATE TABLE thread_events (
    thread_id  TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    kind       TEXT NOT NULL,
    entity_id  TEXT,
    payload    TEXT,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (thread_id, seq)
) WITHOUT ROWID;
""",
    ),
    (
        2,
        "thread file system: entries, content chunks, thumbnails",
        # Spec 07 §7.8. One row per file, link or explicit directory (implicit directories
        # are derived from paths). `id` is AUTOINCREMENT so a rewritten file never gets the
        # id of the content it replaced: a streaming reader holding the old id notices the
        # change. `parent` (the parent directory's path) serves listings; prefix queries are
        # byte ranges on `path` (exact and case-sensitive, no LIKE). Content lives in chunks
        # of at most 1.75 MiB, and thumbnails in their own table, so neither is rewritten
        # when an entry is moved; both cascade with their entry, entries with their thread.
        """
CREATE TABLE files (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    thread_id   TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    path        TEXT NOT NULL,
    parent      TEXT NOT NULL,
    name        TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('file','link','dir')),
    mime_type   TEXT NOT NULL,
    location    TEXT,
    size        INTEGER NOT NULL DEFAULT 0,
    metadata    TEXT,
    width       INTEGER,
    height      INTEGER,
    created_at  INTEGER NOT NULL,
    chunk_count INTEGER NOT NULL DEFAULT 0,
    UNIQUE (thread_id, path)
);
CREATE INDEX files_parent ON files(thread_id, parent, name);

CREATE TABLE file_chunks (
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    idx     INTEGER NOT NULL,
    data    BLOB NOT NULL,
    PRIMARY KEY (file_id, idx)
);

CREATE TABLE file_thumbnails (
    file_id INTEGER PRIMARY KEY REFERENCES files(id) ON DELETE CASCADE,
    data    BLOB NOT NULL
);
""",
    ),
    (
        3,
        "thread variables, properties and activity",
        """
ALTER TABLE threads ADD COLUMN env TEXT;
ALTER TABLE threads ADD COLUMN env_types TEXT;
ALTER TABLE threads ADD COLUMN properties TEXT;
ALTER TABLE threads ADD COLUMN last_activity_us INTEGER;
CREATE INDEX threads_activity ON threads(last_activity_us);
CREATE INDEX messages_client_id
    ON messages(thread_id, json_extract(metadata, '$.client_message_id'))
    WHERE json_extract(metadata, '$.client_message_id') IS NOT NULL;
""",
    ),
    (
        4,
        "users, API keys, sessions and WebSocket tickets",
        """
CREATE TABLE users (
    id            TEXT PRIMARY KEY,
    username      TEXT NOT NULL UNIQUE,
    password_hash TEXT,
    role          TEXT NOT NULL CHECK (role IN ('admin','user','api')),
    permissions   TEXT,
    roles         TEXT NOT NULL DEFAULT '[]',
    display_name  TEXT,
    email         TEXT,
    avatar_url    TEXT,
    created_at_us INTEGER NOT NULL
);

CREATE TABLE api_keys (
    id              TEXT PRIMARY KEY,
    user_id         TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name            TEXT NOT NULL,
    key_digest      TEXT NOT NULL UNIQUE,
    key_prefix      TEXT NOT NULL,
    last_five       TEXT NOT NULL,
    created_at_us   INTEGER NOT NULL,
    last_used_at_us INTEGER,
    expires_at_us   INTEGER
);
CREATE INDEX api_keys_user ON api_keys(user_id, created_at_us);

CREATE TABLE sessions (
    token_digest  TEXT PRIMARY KEY,
    user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at_us INTEGER NOT NULL,
    expires_at_us INTEGER NOT NULL
);
CREATE INDEX sessions_user ON sessions(user_id);

CREATE TABLE auth_tickets (
    ticket_digest     TEXT PRIMARY KEY,
    pathname          TEXT NOT NULL,
    auth_type         TEXT NOT NULL,
    principal_id      TEXT NOT NULL,
    credential_digest TEXT,
    expires_at_us     INTEGER NOT NULL
);
CREATE INDEX auth_tickets_expiry ON auth_tickets(expires_at_us);
""",
    ),
    (
        5,
        "log bodies in a rowid table; LLM request bodies as deltas against an earlier row",
        # log_bodies was WITHOUT ROWID: its rows (bodies of up to megabytes) sat in the
        # key's b-tree, and SQLite reads a cell's whole overflowing payload to compare keys,
        # so every lookup, even of a missing key, read through large bodies (measured: 0.4
        # ms for one small lookup among 250 KB bodies, 6 µs in a rowid table, where the key
        # index holds keys only). The table is rebuilt as a rowid table, same columns.
        #
        # store/sqlite/bodies.py. One row per log row written with a `request_delta`. A root
        # (`base_id` NULL, `depth` 0) keeps its full text in log_bodies and here only where
        # its messages start (`prefix`), their total length (`size`) and each one's length
        # (`lengths`, a JSON array), so later rows can take its leading messages. A delta
        # row has no log_bodies request row: its text is `prefix`, the first `keep`
        # messages of `base_id`, its own `fragments` (joined by ',', cut by `lengths`) and
        # `suffix` (NULL: the base's, whose digest is `suffix_hash`). `depth` is the
        # base's + 1, at most 64, so a read follows at most 64 rows to the root.
        # `thread_id` makes the base check one lookup; `base_id` has no foreign key (no
        # index to keep): log rows are deleted only with their thread, chains never leave
        # a thread, so the cascade from logs removes a chain whole.
        """
ALTER TABLE log_bodies RENAME TO log_bodies_old;
CREATE TABLE log_bodies (
    log_id TEXT NOT NULL REFERENCES logs(id) ON DELETE CASCADE,
    part   TEXT NOT NULL CHECK (part IN ('request', 'response')),
    body   TEXT NOT NULL,
    PRIMARY KEY (log_id, part)
);
INSERT INTO log_bodies(log_id, part, body) SELECT log_id, part, body FROM log_bodies_old;
DROP TABLE log_bodies_old;

CREATE TABLE log_requests (
    log_id      TEXT PRIMARY KEY REFERENCES logs(id) ON DELETE CASCADE,
    thread_id   TEXT NOT NULL,
    base_id     TEXT,
    depth       INTEGER NOT NULL,
    keep        INTEGER NOT NULL,
    count       INTEGER NOT NULL,
    size        INTEGER NOT NULL,
    lengths     TEXT NOT NULL,
    prefix      TEXT NOT NULL,
    suffix      TEXT,
    suffix_hash BLOB NOT NULL,
    fragments   TEXT
);
""",
    ),
    (
        6,
        "event rows keyed by thread number and seq; fewer index writes per message and log row",
        # Measured on a tool-using turn (six write transactions): 92 WAL pages written per
        # turn, 11 of them thread_events. This migration cuts the index pages that every
        # turn writes without serving a read the remaining indexes cannot.
        #
        # thread_events was WITHOUT ROWID, keyed (thread_id, seq): an append that fills a
        # leaf rebalances it with its siblings (3-5 pages written), and every row repeats
        # the thread id in its key. It is now a rowid table whose key is
        # `threads.tnum * 2^32 + seq`: a thread's events are one key range, read by a range
        # search of the table itself, and appends to the newest thread's range take
        # SQLite's quick balance (a new leaf, its parent). `tnum` is a number unique per
        # thread, set at creation (the largest + 1; existing threads take their rowid) and
        # never changed. `thread_id` and `seq` stay as plain columns (same columns as
        # before) without an index; no foreign key either (it would need that index for its
        # cascade): delete_thread deletes a thread's key range itself. seq is below 2^32.
        #
        # messages_top (thread_id, seq) WHERE depth = 0 duplicated the UNIQUE (thread_id,
        # seq) index for top-level rows; its readers (top-level pages with silent rows, the
        # newest top-level id, the model history) filter `depth = 0` on that index.
        #
        # messages_log (log_id) and threads_activity (last_activity_us) are read by no query:
        # nothing looks a message up by its log row, and the activity sort of the thread list
        # orders by COALESCE(last_activity_us, created_at_us), which that index cannot serve
        # (planned as a scan and a sort, with or without it). Each took index writes every
        # turn (the log id set on both model messages; activity at run start and end).
        #
        # logs_incomplete (thread_id) WHERE is_complete = 0 took an entry when an LLM row was
        # inserted and lost it when the row completed: two index writes per row. Its one
        # reader, the settlement's search for incomplete rows, is planned through
        # logs_order (no sort for its ORDER BY created_at, lseq), so nothing reads it.
        #
        # logs_kind indexed every log row; its readers ask for one kind (`kind = ?`, app
        # rows) or for LLM rows (`kind IS NULL`, most rows, read through logs_order). It now
        # holds the rows with a kind only, so LLM rows, written twice per turn, skip it.
        """
ALTER TABLE threads ADD COLUMN tnum INTEGER;
UPDATE threads SET tnum = rowid;
CREATE UNIQUE INDEX threads_tnum ON threads(tnum);
ALTER TABLE thread_events RENAME TO thread_events_v5;
CREATE TABLE thread_events (
    key        INTEGER PRIMARY KEY,
    thread_id  TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    kind       TEXT NOT NULL,
    entity_id  TEXT,
    payload    TEXT,
    created_at INTEGER NOT NULL
);
INSERT INTO thread_events(key, thread_id, seq, kind, entity_id, payload, created_at)
    SELECT t.tnum * 4294967296 + e.seq, e.thread_id, e.seq, e.kind, e.entity_id, e.payload,
        e.created_at
    FROM thread_events_v5 e JOIN threads t ON t.id = e.thread_id;
DROP TABLE thread_events_v5;
DROP INDEX messages_top;
DROP INDEX messages_log;
DROP INDEX threads_activity;
DROP INDEX logs_incomplete;
DROP INDEX logs_kind;
CREATE INDEX logs_kind ON logs(thread_id, kind) WHERE kind IS NOT NULL;
""",
    ),
    (
        7,
        "the count of visible top-level messages in the thread row",
        # message_counts took an upsert (a page write) for every message inserted; most
        # messages are top-level and visible. That bucket (depth 0, silent 0) is now kept in
        # threads.top_visible_count, which every write transaction rewrites anyway (its
        # counters); message_counts keeps the other buckets. A page total is the column
        # plus the matching message_counts rows, read in one statement.
        """
ALTER TABLE threads ADD COLUMN top_visible_count INTEGER NOT NULL DEFAULT 0;
UPDATE threads SET top_visible_count = COALESCE((SELECT count FROM message_counts
    WHERE thread_id = threads.id AND depth = 0 AND silent = 0), 0);
DELETE FROM message_counts WHERE depth = 0 AND silent = 0;
""",
    ),
    (
        8,
        "messages stored in thread and seq order",
        # A message insert wrote the table (appended at its end), the id index, the UNIQUE
        # (thread_id, seq) index and, for most messages, messages_top_visible: four pages.
        # The table is rebuilt with `rid INTEGER PRIMARY KEY` = `threads.tnum * 2^32 +
        # seq` (as thread_events, migration 6): a thread's messages are one key range of
        # the table itself, in seq order, so the (thread_id, seq) index goes (rid is
        # unique, so (thread_id, seq) still is) and messages_top_visible indexes rid. Reads
        # that walked a thread through the (thread_id, seq) index search the rid range.
        # Same columns; `thread_id` keeps its indexes with other columns but loses its
        # foreign key (its cascade would need an index of its own): delete_thread deletes
        # a thread's message range itself. Rebuilt with foreign keys off (migrate), so
        # dropping the old table does not cascade to tool_calls and logs, whose
        # references then name the new table.
        """
CREATE TABLE messages_v8 (
    rid                   INTEGER PRIMARY KEY,
    id                    TEXT NOT NULL UNIQUE,
    thread_id             TEXT NOT NULL,
    seq                   INTEGER NOT NULL,
    role                  TEXT NOT NULL CHECK (role IN ('system','user','assistant','tool')),
    content               TEXT,
    name                  TEXT,
    tool_calls            TEXT,
    tool_call_id          TEXT,
    tool_status           TEXT CHECK (tool_status IN ('success','error')),
    status                TEXT NOT NULL CHECK (status IN ('pending','completed','failed')),
    attachments           TEXT,
    reasoning_content     TEXT,
    reasoning_details     TEXT,
    prompt                TEXT,
    created_at            INTEGER NOT NULL,
    parent_id             TEXT,
    depth                 INTEGER NOT NULL DEFAULT 0,
    silent                INTEGER NOT NULL DEFAULT 0,
    metadata              TEXT,
    subagent_id           TEXT,
    log_id                TEXT,
    request_sent_at       INTEGER,
    response_completed_at INTEGER
);
INSERT INTO messages_v8(
    rid, id, thread_id, seq, role, content, name, tool_calls, tool_call_id, tool_status,
    status, attachments, reasoning_content, reasoning_details, prompt, created_at,
    parent_id, depth, silent, metadata, subagent_id, log_id, request_sent_at,
    response_completed_at
)
SELECT
    t.tnum * 4294967296 + m.seq, m.id, m.thread_id, m.seq, m.role, m.content, m.name,
    m.tool_calls, m.tool_call_id, m.tool_status, m.status, m.attachments,
    m.reasoning_content, m.reasoning_details, m.prompt, m.created_at, m.parent_id, m.depth,
    m.silent, m.metadata, m.subagent_id, m.log_id, m.request_sent_at,
    m.response_completed_at
    FROM messages m JOIN threads t ON t.id = m.thread_id;
DROP TABLE messages;
ALTER TABLE messages_v8 RENAME TO messages;
CREATE INDEX messages_top_visible ON messages(rid) WHERE depth = 0 AND silent = 0;
CREATE INDEX messages_tool_call ON messages(thread_id, tool_call_id)
    WHERE tool_call_id IS NOT NULL;
CREATE INDEX messages_parent ON messages(thread_id, parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX messages_subagent ON messages(thread_id, subagent_id, seq)
    WHERE subagent_id IS NOT NULL;
CREATE INDEX messages_client_id
    ON messages(thread_id, json_extract(metadata, '$.client_message_id'))
    WHERE json_extract(metadata, '$.client_message_id') IS NOT NULL;
""",
    ),
    # CHECK (col IN (3+ constants)) built an ephemeral b-tree per check: schema_checks.py
    (9, "CHECK constraints as comparisons", ""),
    (
        10,
        "thread list ordered by activity through an index",
        # The default order of the thread list (spec 08 §8.3.1 `activity`) was
        # COALESCE(last_activity_us, created_at_us) DESC, created_at_us DESC, id: no index
        # can serve an expression over two columns, so every listing read and sorted every
        # thread (44 ms at 50,000 threads for a page of 50). The activity starts at the
        # creation time (§8.2.2 "starts at created_at"), so it is stored from the start and
        # the order is by the column itself, through an index that holds the whole order
        # (a listing reads its page and stops); so does threads_user_activity for a user's
        # own list (`user_id = ?`, the list of every non-admin caller, and the whole list
        # when one service account creates every thread). Each takes a write when a run
        # starts and ends (the activity bumps), at the newest end of the index.
        """
UPDATE threads SET last_activity_us = created_at_us WHERE last_activity_us IS NULL;
CREATE INDEX threads_activity_order ON threads(last_activity_us DESC, created_at_us DESC, id);
CREATE INDEX threads_user_activity
    ON threads(user_id, last_activity_us DESC, created_at_us DESC, id);
""",
    ),
    (
        11,
        "short LLM response bodies in the log row",
        # Each LLM row's response body was a log_bodies row: a second table and its
        # (log_id, part) index, keyed by a random id, so two more statements and ~6 of the
        # ~55 pages a tool-using turn wrote. A response of at most INLINE_RESPONSE_MAX
        # characters (store/sqlite/bodies.py) is now stored in this column instead; a
        # longer one stays in log_bodies, so updating the row's small columns (a tool
        # result) never rewrites a large body. A body is in one place or the other, never
        # both; reads take it from either, so the rows already stored stay where they are
        # (no copy), and an update of their response moves it when it is short.
        """
ALTER TABLE logs ADD COLUMN response_body TEXT;
""",
    ),
    (
        12,
        "the cause of a failed run with its status",
        # A failed run kept only its reason code (step_error …); the cause (the error's
        # type, one line, the log row with the details) was in a log row only. It is now
        # kept with the status (spec 01 §1.7.4) as a JSON object, written with the status
        # in the same UPDATE; NULL unless the status is failed. Statuses written before
        # this column read without an error.
        """
ALTER TABLE threads ADD COLUMN status_error TEXT;
""",
    ),
    (
        13,
        "login attempts kept in the store",
        # The login limits of spec 10 §10.11 were counters in each process's memory: on
        # PostgreSQL every node allowed the limit (60 wrong passwords through 3 nodes: 30
        # checked). The attempts are now rows of the store, counted and checked in one
        # transaction, by SHA-256 digest of the address or username; kept an hour at most.
        """
CREATE TABLE auth_attempts (
    attempt_id TEXT NOT NULL,
    key_digest TEXT NOT NULL,
    at_us      INTEGER NOT NULL,
    PRIMARY KEY (attempt_id, key_digest)
);
CREATE INDEX auth_attempts_key ON auth_attempts(key_digest, at_us);
CREATE INDEX auth_attempts_age ON auth_attempts(at_us);
""",
    ),
    (
        14,
        "the tool-call ledger: approvals and recorded starts",
        # Spec 14: a row per tool call that needs a person's decision (approval is not
        # NULL) or whose start a resumable run records (started_at). A decision is consumed
        # by the conditional UPDATE that sets started_at (approved, not yet started), so an
        # approval runs its tool at most once. Deleted with its thread.
        """
CREATE TABLE tool_ledger (
    thread_id        TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    tool_call_id     TEXT NOT NULL,
    message_id       TEXT NOT NULL,
    tool             TEXT NOT NULL,
    arguments        TEXT NOT NULL,
    arguments_hash   TEXT NOT NULL,
    approval         TEXT CHECK (approval IN ('pending','approved','rejected','cancelled')),
    requested_at     INTEGER NOT NULL,
    decided_at       INTEGER,
    decided_by       TEXT,
    reason           TEXT,
    edited_arguments TEXT,
    started_at       INTEGER,
    PRIMARY KEY (thread_id, tool_call_id)
);
CREATE INDEX threads_parked ON threads(id) WHERE status_reason = 'awaiting_approval';
""",
    ),
    (
        15,
        "the resumes of a thread's lost runs",
        # Spec 16: an agent with on_lost="resume" has its lost run settled and resumed
        # from the stored history, at most max_resumes times in a row. The count is kept
        # with the thread (a crash loop outlives every process), raised by each resuming
        # settlement and cleared when a resumed run ends or a lost one is settled for good.
        # The partial index finds the threads whose resumed run has not started yet (a
        # process that settled one and stopped before it started it) without a scan.
        """
ALTER TABLE threads ADD COLUMN resumes INTEGER NOT NULL DEFAULT 0;
CREATE INDEX threads_resumes ON threads(resumes) WHERE resumes > 0;
""",
    ),
    (
        16,
        "budgets of threads and quotas of users",
        # Spec 15: a thread keeps the budgets set at its creation and the lifetime budgets
        # of its ancestors (a JSON array, NULL when none: a thread without budgets costs its
        # run nothing to check), and an admin sets a user's quota over a rolling window.
        # The spend itself is summed from the logs (logs_order, threads_user).
        """
ALTER TABLE threads ADD COLUMN budgets TEXT;
CREATE TABLE user_quotas (
    user_id       TEXT PRIMARY KEY,
    quota         TEXT NOT NULL,
    updated_at_us INTEGER NOT NULL
);
""",
    ),
    (
        17,
        "the shared state and the run context of a thread",
        # Spec 02 §2.20: a thread's shared state, one JSON object (NULL: never written)
        # with the version of its last change and when it was made; spec 13 §13.2.11:
        # the context of the thread's latest AG-UI request (a JSON array, NULL: none).
        """
ALTER TABLE threads ADD COLUMN shared_state TEXT;
ALTER TABLE threads ADD COLUMN shared_state_version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE threads ADD COLUMN shared_state_at INTEGER;
ALTER TABLE threads ADD COLUMN run_context TEXT;
""",
    ),
    (
        18,
        "the OAuth authorization server's clients, codes and tokens",
        # Spec 10 §10.15: MCP hosts register themselves (RFC 7591), a signed-in user's
        # consent issues a single-use code (PKCE S256), the code and each refresh give an
        # access token with its refresh token. Codes and tokens are kept as SHA-256
        # digests; a grant's rows share grant_id (the code's digest), so a reused code
        # revokes what it issued, as a rotated refresh token presented again does (its
        # digest kept in oauth_spent_refresh until it would have expired); a user's
        # deletion deletes their codes and tokens.
        """
CREATE TABLE oauth_clients (
    client_id     TEXT PRIMARY KEY,
    metadata      TEXT NOT NULL,
    secret_digest TEXT,
    created_at_us INTEGER NOT NULL
);
CREATE TABLE oauth_codes (
    code_digest           TEXT PRIMARY KEY,
    client_id             TEXT NOT NULL,
    user_id               TEXT NOT NULL,
    redirect_uri          TEXT NOT NULL,
    scope                 TEXT NOT NULL,
    resource              TEXT NOT NULL,
    code_challenge        TEXT NOT NULL,
    code_challenge_method TEXT NOT NULL,
    expires_at_us         INTEGER NOT NULL,
    used                  INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX oauth_codes_user ON oauth_codes(user_id);
CREATE INDEX oauth_codes_expiry ON oauth_codes(expires_at_us);
CREATE TABLE oauth_tokens (
    access_digest         TEXT PRIMARY KEY,
    refresh_digest        TEXT NOT NULL UNIQUE,
    grant_id              TEXT NOT NULL,
    client_id             TEXT NOT NULL,
    user_id               TEXT NOT NULL,
    scope                 TEXT NOT NULL,
    resource              TEXT NOT NULL,
    issued_at_us          INTEGER NOT NULL,
    expires_at_us         INTEGER NOT NULL,
    refresh_expires_at_us INTEGER NOT NULL
);
CREATE INDEX oauth_tokens_user ON oauth_tokens(user_id);
CREATE INDEX oauth_tokens_grant ON oauth_tokens(grant_id);
CREATE INDEX oauth_tokens_expiry ON oauth_tokens(refresh_expires_at_us);
CREATE TABLE oauth_spent_refresh (
    refresh_digest TEXT PRIMARY KEY,
    grant_id       TEXT NOT NULL,
    expires_at_us  INTEGER NOT NULL
);
CREATE INDEX oauth_spent_refresh_expiry ON oauth_spent_refresh(expires_at_us);
""",
    ),
    (
        19,
        "the oldest schema version each migration stays compatible with",
        # Spec 17 §17.4: from migration 19 on, migrations only add (expand/contract); each
        # records the oldest schema version whose code can still use the database after it
        # (store/core/upgrades.py), so a store of an older release opens a newer schema
        # whose migrations it can work with instead of refusing every newer version.
        """
ALTER TABLE threadloom_migrations ADD COLUMN compatible_down_to INTEGER;
""",
    ),
    (
        20,
        "schedules and the claims of their fires",
        # Spec 18: a schedule's definition (JSON), its next fire time, and the fire a node
        # claimed (due time, node, lease expiry) until it settles it; its last fire.
        """
CREATE TABLE schedules (
    id                  TEXT PRIMARY KEY,
    spec                TEXT NOT NULL,
    source              TEXT NOT NULL,
    enabled             INTEGER NOT NULL DEFAULT 1,
    next_fire_us        INTEGER,
    created_at_us       INTEGER NOT NULL,
    updated_at_us       INTEGER NOT NULL,
    fire_count          INTEGER NOT NULL DEFAULT 0,
    last_fire_us        INTEGER,
    last_status         TEXT,
    last_thread_id      TEXT,
    last_error          TEXT,
    fire_due_us         INTEGER,
    fire_node           TEXT,
    fire_lease_until_us INTEGER
);
CREATE INDEX schedules_due ON schedules(next_fire_us) WHERE enabled = 1;
CREATE INDEX schedules_fires ON schedules(fire_lease_until_us) WHERE fire_due_us IS NOT NULL;
""",
    ),
    (
        21,
        "outbound webhooks: subscriptions and the outbox of their deliveries",
        # Spec 19: a subscription names a URL, a secret and event types; the outbox holds
        # one row per event and subscription, written in the transaction of the event it
        # reports, claimed by a node with a lease (lease_node, lease_until_us) while it is
        # delivered, and kept pending (next_at_us), delivered or dead.
        """
CREATE TABLE IF NOT EXISTS webhook_subscriptions (
    id            TEXT PRIMARY KEY,
    url           TEXT NOT NULL,
    secret        TEXT NOT NULL,
    event_types   TEXT NOT NULL,
    enabled       INTEGER NOT NULL DEFAULT 1,
    description   TEXT,
    created_at_us INTEGER NOT NULL,
    updated_at_us INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS webhook_outbox (
    event_id        TEXT NOT NULL,
    subscription_id TEXT NOT NULL,
    event_type      TEXT NOT NULL,
    payload         TEXT NOT NULL,
    created_at_us   INTEGER NOT NULL,
    state           TEXT NOT NULL DEFAULT 'pending',
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_at_us      INTEGER NOT NULL,
    lease_node      TEXT,
    lease_until_us  INTEGER,
    last_error      TEXT,
    last_status     INTEGER,
    delivered_at_us INTEGER,
    PRIMARY KEY (event_id, subscription_id)
);
CREATE INDEX IF NOT EXISTS webhook_outbox_due ON webhook_outbox(state, next_at_us);
CREATE INDEX IF NOT EXISTS webhook_outbox_subscription ON webhook_outbox(subscription_id, state);
""",
    ),
    (
        22,
        "the memory store: JSON documents by scope, namespace and key",
        # Spec 20: an item of a user's or an agent's memory (scope), under a namespace (its
        # labels joined by "."), with the version each write increments and its expiry.
        """
CREATE TABLE IF NOT EXISTS memory_items (
    scope         TEXT NOT NULL,
    namespace     TEXT NOT NULL,
    key           TEXT NOT NULL,
    value         TEXT NOT NULL,
    created_at_us INTEGER NOT NULL,
    updated_at_us INTEGER NOT NULL,
    version       INTEGER NOT NULL DEFAULT 1,
    expires_at_us INTEGER,
    PRIMARY KEY (scope, namespace, key)
);
CREATE INDEX IF NOT EXISTS memory_items_expiry ON memory_items(expires_at_us)
    WHERE expires_at_us IS NOT NULL;
""",
    ),
    (
        23,
        "inbound triggers and the claims of their calls",
        # Spec 22: a trigger's definition (JSON), its secret, its call count; one row per
        # call by its idempotency key, claimed with a lease until the call settles (done).
        """
CREATE TABLE IF NOT EXISTS triggers (
    id             TEXT PRIMARY KEY,
    spec           TEXT NOT NULL,
    secret         TEXT NOT NULL,
    enabled        INTEGER NOT NULL DEFAULT 1,
    created_at_us  INTEGER NOT NULL,
    updated_at_us  INTEGER NOT NULL,
    fire_count     INTEGER NOT NULL DEFAULT 0,
    last_fire_us   INTEGER,
    last_thread_id TEXT
);
CREATE TABLE IF NOT EXISTS trigger_fires (
    trigger_id     TEXT NOT NULL,
    key            TEXT NOT NULL,
    thread_id      TEXT NOT NULL,
    created_at_us  INTEGER NOT NULL,
    lease_until_us INTEGER NOT NULL,
    done           INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (trigger_id, key)
);
""",
    ),
    (
        24,
        "compactions: summaries that stand for a range of a thread's messages",
        # Spec 23: the range (first and last message id), the summary, who wrote it and what
        # it cost, the provider's own item (JSON), when it was undone; the messages stay.
        """
CREATE TABLE IF NOT EXISTS compactions (
    id               TEXT PRIMARY KEY,
    thread_id        TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    first_message_id TEXT NOT NULL,
    last_message_id  TEXT NOT NULL,
    message_count    INTEGER NOT NULL,
    summary          TEXT NOT NULL,
    model            TEXT,
    trigger          TEXT NOT NULL,
    input_tokens     INTEGER NOT NULL DEFAULT 0,
    output_tokens    INTEGER NOT NULL DEFAULT 0,
    cost             REAL,
    provider_item    TEXT,
    created_at_us    INTEGER NOT NULL,
    undone_at_us     INTEGER
);
CREATE INDEX IF NOT EXISTS compactions_thread ON compactions(thread_id, created_at_us);
""",
    ),
    (
        25,
        "the thread a fork was made from, and at which message",
        # Issue 35 item 3, spec 08 §8.3.8: a fork's lineage, one row per fork, gone with the
        # fork's thread; the index answers "the forks of a thread" (GET …/forks).
        """
CREATE TABLE IF NOT EXISTS thread_forks (
    thread_id       TEXT PRIMARY KEY REFERENCES threads(id) ON DELETE CASCADE,
    from_thread_id  TEXT NOT NULL,
    from_message_id TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS thread_forks_from ON thread_forks(from_thread_id);
""",
    ),
    (
        26,
        "the full-text index of message text",
        # Spec 08 §8.14: an FTS5 index of the visible top-level user and assistant text,
        # filled with the messages already stored and kept in step by triggers
        # (search_index.py says how).
        SEARCH_INDEX,
    ),
    (
        27,
        "the full-text index's backlog: messages indexed at search time, not per commit",
        # Issue 40: FTS5 wrote an index segment at each commit of an indexed message (4–7 % of
        # a turn's instructions); the insert trigger now notes the message in a backlog,
        # indexed in one transaction before a search and by the store's background pass
        # (search_index.py says how).
        SEARCH_BACKLOG,
    ),
]
