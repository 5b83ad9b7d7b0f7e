"""The PostgreSQL schema, created and migrated on open under an advisory lock (spec 12
§12.8 rule 5: several nodes may start at once; one migrates, the others wait for it).

The tables are those of the SQLite store as its migrations left them (spec 01 §1.11's
logical model in the physical layout the shared logic queries): messages and event rows
keyed ``tnum · 2³² + seq``, so a thread's rows are one key range in ``seq`` order, and the
same column types — booleans as ``smallint`` 0/1, JSON as text — so each statement is one
text for both stores. Every text column is ``COLLATE "C"``: ids, paths and the prefix
ranges of the file system compare bytewise, as SQLite's BINARY does, whatever the
database's locale. Added for spec 12: the lease columns of ``threads`` and ``nodes``.

The tables live in the connection's current schema (the first of its ``search_path``),
so one database can hold several Threadloom stores (the tests give each its own).
"""

from __future__ import annotations

from typing import Any

import psycopg

from threadloom.store.core.upgrades import Contraction, Plan, check_newer, floor
from threadloom.store.core.upgrades import SchemaTooNew as SchemaTooNew

T = 'TEXT COLLATE "C"'

_V1 = f"""
CREATE SEQUENCE threads_tnum_seq;
CREATE TABLE threads (
    id                    {T} PRIMARY KEY,
    agent_id              {T} NOT NULL,
    origin_agent_id       {T} NOT NULL,
    user_id               {T},
    tags                  {T} NOT NULL DEFAULT '[]',
    parent_id             {T} REFERENCES threads(id) ON DELETE CASCADE,
    arguments             {T},
    created_at_us         BIGINT NOT NULL,
    terminated            BIGINT,
    status_state          {T} NOT NULL
                          CHECK (status_state IN ('idle', 'running', 'failed')),
    status_since          BIGINT NOT NULL,
    status_reason         {T},
    msg_seq               BIGINT NOT NULL DEFAULT 0,
    clock_us              BIGINT NOT NULL DEFAULT 0,
    queue_seq             BIGINT NOT NULL DEFAULT 0,
    event_seq             BIGINT NOT NULL DEFAULT 0,
    log_seq               BIGINT NOT NULL DEFAULT 0,
    events_pruned_through BIGINT NOT NULL DEFAULT 0,
    stopped               SMALLINT NOT NULL DEFAULT 0,
    session_turns_a       BIGINT NOT NULL DEFAULT 0,
    session_turns_b       BIGINT NOT NULL DEFAULT 0,
    overlap               {T},
    env                   {T},
    env_types             {T},
    properties            {T},
    last_activity_us      BIGINT,
    tnum                  BIGINT NOT NULL CONSTRAINT threads_tnum_key UNIQUE,
    top_visible_count     BIGINT NOT NULL DEFAULT 0,
    lease_node            {T},
    lease_token           BIGINT NOT NULL DEFAULT 0,
    lease_acquired_at     TIMESTAMPTZ
);
ALTER SEQUENCE threads_tnum_seq OWNED BY threads.tnum;
CREATE INDEX threads_user ON threads(user_id, created_at_us);
CREATE INDEX threads_parent ON threads(parent_id);
CREATE INDEX threads_agent ON threads(agent_id);
CREATE INDEX threads_created ON threads(created_at_us);
CREATE INDEX threads_activity_order ON threads(last_activity_us DESC, created_at_us DESC, id);
CREATE INDEX threads_user_activity
    ON threads(user_id, last_activity_us DESC, created_at_us DESC, id);
CREATE INDEX threads_running ON threads(status_state) WHERE status_state = 'running';

CREATE TABLE messages (
    rid                   BIGINT CONSTRAINT messages_pkey PRIMARY KEY,
    id                    {T} NOT NULL CONSTRAINT messages_id_key UNIQUE,
    thread_id             {T} NOT NULL,
    seq                   BIGINT NOT NULL,
    role                  {T} NOT NULL
                          CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    content               {T},
    name                  {T},
    tool_calls            {T},
    tool_call_id          {T},
    tool_status           {T} CHECK (tool_status IN ('success', 'error')),
    status                {T} NOT NULL CHECK (status IN ('pending', 'completed', 'failed')),
    attachments           {T},
    reasoning_content     {T},
    reasoning_details     {T},
    prompt                {T},
    created_at            BIGINT NOT NULL,
    parent_id             {T},
    depth                 BIGINT NOT NULL DEFAULT 0,
    silent                SMALLINT NOT NULL DEFAULT 0,
    metadata              {T},
    subagent_id           {T},
    log_id                {T},
    request_sent_at       BIGINT,
    response_completed_at BIGINT
);
CREATE INDEX messages_top_visible ON messages(rid) WHERE depth = 0 AND silent = 0;
CREATE INDEX messages_tool_call ON messages(thread_id, tool_call_id)
    WHERE tool_call_id IS NOT NULL;
CREATE INDEX messages_parent ON messages(thread_id, parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX messages_subagent ON messages(thread_id, subagent_id, seq)
    WHERE subagent_id IS NOT NULL;
CREATE INDEX messages_client_id ON messages(thread_id, (metadata::json ->> 'client_message_id'))
    WHERE (metadata::json ->> 'client_message_id') IS NOT NULL;

CREATE TABLE message_counts (
    thread_id {T} NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    depth     BIGINT NOT NULL,
    silent    SMALLINT NOT NULL,
    count     BIGINT NOT NULL,
    PRIMARY KEY (thread_id, depth, silent)
);
CREATE TABLE tool_calls (
    thread_id  {T} NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    id         {T} NOT NULL,
    message_id {T} NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    name       {T} NOT NULL,
    arguments  {T} NOT NULL,
    created_at BIGINT NOT NULL,
    CONSTRAINT tool_calls_pkey PRIMARY KEY (thread_id, id)
);
CREATE INDEX tool_calls_message ON tool_calls(message_id);

CREATE TABLE message_queue (
    id          {T} CONSTRAINT message_queue_pkey PRIMARY KEY,
    thread_id   {T} NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    qseq        BIGINT NOT NULL,
    role        {T} NOT NULL CHECK (role IN ('user', 'assistant', 'system')),
    content     {T} NOT NULL,
    attachments {T},
    silent      SMALLINT NOT NULL DEFAULT 0,
    metadata    {T},
    source      {T} NOT NULL,
    created_at  BIGINT NOT NULL,
    UNIQUE (thread_id, qseq)
);

CREATE TABLE logs (
    id                          {T} CONSTRAINT logs_pkey PRIMARY KEY,
    thread_id                   {T} NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    message_id                  {T} REFERENCES messages(id) ON DELETE SET NULL,
    lseq                        BIGINT NOT NULL,
    kind                        {T},
    provider                    {T} NOT NULL,
    model                       {T} NOT NULL,
    created_at                  BIGINT NOT NULL,
    is_complete                 SMALLINT NOT NULL,
    error                       {T},
    error_type                  {T},
    error_origin                {T},
    endpoint                    {T},
    model_name                  {T},
    actual_provider             {T},
    standard_agents_router_used SMALLINT,
    prompt_name                 {T},
    parent_log_id               {T},
    retry_of_log_id             {T},
    request_headers             {T},
    response_headers            {T},
    status_code                 BIGINT,
    input_tokens                BIGINT,
    cached_tokens               BIGINT,
    output_tokens               BIGINT,
    reasoning_tokens            BIGINT,
    total_tokens                BIGINT,
    latency_ms                  BIGINT,
    time_to_first_token_ms      BIGINT,
    generation_ms               BIGINT,
    finish_reason               {T},
    errors                      {T},
    cost_input                  DOUBLE PRECISION,
    cost_cached                 DOUBLE PRECISION,
    cost_output                 DOUBLE PRECISION,
    cost_router_fee             DOUBLE PRECISION,
    router_fee_percent          DOUBLE PRECISION,
    cost_total                  DOUBLE PRECISION,
    message_history_length      BIGINT,
    tools_available             BIGINT,
    tools_called                {T},
    tools_schema                {T},
    system_prompt               {T},
    reasoning_content           {T},
    tool_results                {T},
    provider_tools              {T},
    queued_tools                {T},
    app_level                   {T},
    app_message                 {T},
    app_status                  {T},
    app_error                   {T},
    app_duration_ms             DOUBLE PRECISION,
    app_cost                    DOUBLE PRECISION,
    app_request                 {T},
    app_response                {T},
    app_trigger                 {T},
    app_data                    {T},
    response_body               {T}
);
CREATE INDEX logs_order ON logs(thread_id, created_at, lseq);
CREATE INDEX logs_message ON logs(message_id);
CREATE INDEX logs_parent ON logs(parent_log_id) WHERE parent_log_id IS NOT NULL;
CREATE INDEX logs_retry ON logs(retry_of_log_id) WHERE retry_of_log_id IS NOT NULL;
CREATE INDEX logs_kind ON logs(thread_id, kind) WHERE kind IS NOT NULL;
CREATE TABLE log_bodies (
    log_id {T} NOT NULL REFERENCES logs(id) ON DELETE CASCADE,
    part   {T} NOT NULL CHECK (part IN ('request', 'response')),
    body   {T} NOT NULL,
    PRIMARY KEY (log_id, part)
);
CREATE TABLE log_requests (
    log_id      {T} PRIMARY KEY REFERENCES logs(id) ON DELETE CASCADE,
    thread_id   {T} NOT NULL,
    base_id     {T},
    depth       BIGINT NOT NULL,
    keep        BIGINT NOT NULL,
    count       BIGINT NOT NULL,
    size        BIGINT NOT NULL,
    lengths     {T} NOT NULL,
    prefix      {T} NOT NULL,
    suffix      {T},
    suffix_hash BYTEA NOT NULL,
    fragments   {T}
);

CREATE TABLE subagent_registry (
    parent_thread_id     {T} NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    reference            {T} NOT NULL,
    relationship         {T} NOT NULL,
    owner                {T} NOT NULL CHECK (owner IN ('a', 'b')),
    name                 {T} NOT NULL,
    title                {T},
    description          {T},
    blocking             SMALLINT NOT NULL,
    resumable            SMALLINT NOT NULL,
    parent_communication {T} NOT NULL,
    status               {T} NOT NULL,
    initial_arguments    {T},
    thread_name          {T},
    spawn_group_id       {T},
    created_at           BIGINT NOT NULL,
    PRIMARY KEY (parent_thread_id, reference)
);

CREATE TABLE files (
    id          BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    thread_id   {T} NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    path        {T} NOT NULL,
    parent      {T} NOT NULL,
    name        {T} NOT NULL,
    kind        {T} NOT NULL CHECK (kind IN ('file', 'link', 'dir')),
    mime_type   {T} NOT NULL,
    location    {T},
    size        BIGINT NOT NULL DEFAULT 0,
    metadata    {T},
    width       BIGINT,
    height      BIGINT,
    created_at  BIGINT NOT NULL,
    chunk_count BIGINT NOT NULL DEFAULT 0,
    CONSTRAINT files_thread_id_path_key UNIQUE (thread_id, path)
);
CREATE INDEX files_parent ON files(thread_id, parent, name);
CREATE TABLE file_chunks (
    file_id BIGINT NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    idx     BIGINT NOT NULL,
    data    BYTEA NOT NULL,
    PRIMARY KEY (file_id, idx)
);
CREATE TABLE file_thumbnails (
    file_id BIGINT PRIMARY KEY REFERENCES files(id) ON DELETE CASCADE,
    data    BYTEA NOT NULL
);

CREATE TABLE users (
    id            {T} CONSTRAINT users_pkey PRIMARY KEY,
    username      {T} NOT NULL CONSTRAINT users_username_key UNIQUE,
    password_hash {T},
    role          {T} NOT NULL CHECK (role IN ('admin', 'user', 'api')),
    permissions   {T},
    roles         {T} NOT NULL DEFAULT '[]',
    display_name  {T},
    email         {T},
    avatar_url    {T},
    created_at_us BIGINT NOT NULL
);
CREATE TABLE api_keys (
    id              {T} CONSTRAINT api_keys_pkey PRIMARY KEY,
    user_id         {T} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name            {T} NOT NULL,
    key_digest      {T} NOT NULL CONSTRAINT api_keys_key_digest_key UNIQUE,
    key_prefix      {T} NOT NULL,
    last_five       {T} NOT NULL,
    created_at_us   BIGINT NOT NULL,
    last_used_at_us BIGINT,
    expires_at_us   BIGINT
);
CREATE INDEX api_keys_user ON api_keys(user_id, created_at_us);
CREATE TABLE sessions (
    token_digest  {T} CONSTRAINT sessions_pkey PRIMARY KEY,
    user_id       {T} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at_us BIGINT NOT NULL,
    expires_at_us BIGINT NOT NULL
);
CREATE INDEX sessions_user ON sessions(user_id);
CREATE TABLE auth_tickets (
    ticket_digest     {T} CONSTRAINT auth_tickets_pkey PRIMARY KEY,
    pathname          {T} NOT NULL,
    auth_type         {T} NOT NULL,
    principal_id      {T} NOT NULL,
    credential_digest {T},
    expires_at_us     BIGINT NOT NULL
);
CREATE INDEX auth_tickets_expiry ON auth_tickets(expires_at_us);

CREATE TABLE thread_events (
    key        BIGINT PRIMARY KEY,
    thread_id  {T} NOT NULL,
    seq        BIGINT NOT NULL,
    kind       {T} NOT NULL,
    entity_id  {T},
    payload    {T},
    created_at BIGINT NOT NULL
);

CREATE TABLE nodes (
    node_id      {T} PRIMARY KEY,
    host         {T} NOT NULL,
    pid          BIGINT NOT NULL,
    started_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    draining     BOOLEAN NOT NULL DEFAULT false
);
"""

_V2 = f"""
ALTER TABLE threads ADD COLUMN status_error {T};
"""
"""The cause of a failed run, kept with its status (spec 01 §1.7.4): a JSON object, NULL
unless the status is failed (SQLite's migration 12)."""

_V3 = f"""
CREATE TABLE auth_attempts (
    attempt_id {T} NOT NULL,
    key_digest {T} NOT NULL,
    at_us      BIGINT NOT NULL,
    CONSTRAINT auth_attempts_pkey PRIMARY KEY (attempt_id, key_digest)
);
CREATE INDEX auth_attempts_key ON auth_attempts(key_digest, at_us);
CREATE INDEX auth_attempts_age ON auth_attempts(at_us);
"""
"""The login attempts of spec 10 §10.11, shared by every node (SQLite's migration 13)."""

_V4 = f"""
CREATE TABLE tool_ledger (
    thread_id        {T} NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    tool_call_id     {T} NOT NULL,
    message_id       {T} NOT NULL,
    tool             {T} NOT NULL,
    arguments        {T} NOT NULL,
    arguments_hash   {T} NOT NULL,
    approval         {T} CHECK (approval IN ('pending','approved','rejected','cancelled')),
    requested_at     BIGINT NOT NULL,
    decided_at       BIGINT,
    decided_by       {T},
    reason           {T},
    edited_arguments {T},
    started_at       BIGINT,
    CONSTRAINT tool_ledger_pkey PRIMARY KEY (thread_id, tool_call_id)
);
CREATE INDEX threads_parked ON threads(id) WHERE status_reason = 'awaiting_approval';
"""
"""The tool-call ledger of spec 14: approvals and recorded starts (SQLite's migration 14)."""

_V5 = """
ALTER TABLE threads ADD COLUMN resumes BIGINT NOT NULL DEFAULT 0;
CREATE INDEX threads_resumes ON threads(resumes) WHERE resumes > 0;
"""
"""The resumes in a row of a thread's lost runs (spec 16 §16.5; SQLite's migration 15)."""

_V6 = f"""
ALTER TABLE threads ADD COLUMN budgets {T};
CREATE TABLE user_quotas (
    user_id       {T} PRIMARY KEY,
    quota         {T} NOT NULL,
    updated_at_us BIGINT NOT NULL
);
"""
"""Budgets of threads and quotas of users (spec 15, SQLite's migration 16)."""

_V7 = f"""
ALTER TABLE threads ADD COLUMN shared_state {T};
ALTER TABLE threads ADD COLUMN shared_state_version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE threads ADD COLUMN shared_state_at BIGINT;
ALTER TABLE threads ADD COLUMN run_context {T};
"""
"""The shared state and the run context of a thread (spec 02 §2.20, spec 13 §13.2.11;
SQLite's migration 17)."""
_V8 = f"""
CREATE TABLE oauth_clients (
    client_id     {T} PRIMARY KEY,
    metadata      {T} NOT NULL,
    secret_digest {T},
    created_at_us BIGINT NOT NULL
);
CREATE TABLE oauth_codes (
    code_digest           {T} PRIMARY KEY,
    client_id             {T} NOT NULL,
    user_id               {T} NOT NULL,
    redirect_uri          {T} NOT NULL,
    scope                 {T} NOT NULL,
    resource              {T} NOT NULL,
    code_challenge        {T} NOT NULL,
    code_challenge_method {T} NOT NULL,
    expires_at_us         BIGINT NOT NULL,
    used                  BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX oauth_codes_user ON oauth_codes(user_id);
CREATE INDEX oauth_codes_expiry ON oauth_codes(expires_at_us);
CREATE TABLE oauth_tokens (
    access_digest         {T} PRIMARY KEY,
    refresh_digest        {T} NOT NULL UNIQUE,
    grant_id              {T} NOT NULL,
    client_id             {T} NOT NULL,
    user_id               {T} NOT NULL,
    scope                 {T} NOT NULL,
    resource              {T} NOT NULL,
    issued_at_us          BIGINT NOT NULL,
    expires_at_us         BIGINT NOT NULL,
    refresh_expires_at_us BIGINT NOT NULL
);
CREATE INDEX oauth_tokens_user ON oauth_tokens(user_id);
CREATE INDEX oauth_tokens_grant ON oauth_tokens(grant_id);
CREATE INDEX oauth_tokens_expiry ON oauth_tokens(refresh_expires_at_us);
CREATE TABLE oauth_spent_refresh (
    refresh_digest {T} PRIMARY KEY,
    grant_id       {T} NOT NULL,
    expires_at_us  BIGINT NOT NULL
);
CREATE INDEX oauth_spent_refresh_expiry ON oauth_spent_refresh(expires_at_us);
"""
"""The OAuth authorization server's clients, codes and tokens (spec 10 §10.15; SQLite's
migration 18)."""

_V9 = """
ALTER TABLE threadloom_migrations ADD COLUMN compatible_down_to BIGINT;
"""
"""Each migration from here on records the oldest schema version whose code can still use
the schema after it (spec 17 §17.4, ``store/core/upgrades.py``; SQLite's migration 19)."""

_V10 = f"""
CREATE TABLE schedules (
    id                  {T} PRIMARY KEY,
    spec                {T} NOT NULL,
    source              {T} NOT NULL,
    enabled             SMALLINT NOT NULL DEFAULT 1,
    next_fire_us        BIGINT,
    created_at_us       BIGINT NOT NULL,
    updated_at_us       BIGINT NOT NULL,
    fire_count          BIGINT NOT NULL DEFAULT 0,
    last_fire_us        BIGINT,
    last_status         {T},
    last_thread_id      {T},
    last_error          {T},
    fire_due_us         BIGINT,
    fire_node           {T},
    fire_lease_until_us BIGINT
);
CREATE INDEX schedules_due ON schedules(next_fire_us) WHERE enabled = 1;
CREATE INDEX schedules_fires ON schedules(fire_lease_until_us) WHERE fire_due_us IS NOT NULL;
"""
"""Schedules and the claims of their fires (spec 18; SQLite's migration 20)."""
_V11 = """
CREATE TABLE IF NOT EXISTS webhook_subscriptions (
    id            TEXT PRIMARY KEY,
    url           TEXT NOT NULL,
    secret        TEXT NOT NULL,
    event_types   TEXT NOT NULL,
    enabled       INTEGER NOT NULL DEFAULT 1,
    description   TEXT,
    created_at_us BIGINT NOT NULL,
    updated_at_us BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS webhook_outbox (
    event_id        TEXT NOT NULL,
    subscription_id TEXT NOT NULL,
    event_type      TEXT NOT NULL,
    payload         TEXT NOT NULL,
    created_at_us   BIGINT NOT NULL,
    state           TEXT NOT NULL DEFAULT 'pending',
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_at_us      BIGINT NOT NULL,
    lease_node      TEXT,
    lease_until_us  BIGINT,
    last_error      TEXT,
    last_status     INTEGER,
    delivered_at_us BIGINT,
    PRIMARY KEY (event_id, subscription_id)
);
CREATE INDEX IF NOT EXISTS webhook_outbox_due ON webhook_outbox(state, next_at_us);
CREATE INDEX IF NOT EXISTS webhook_outbox_subscription ON webhook_outbox(subscription_id, state);
"""
"""Outbound webhooks: subscriptions and the outbox of their deliveries (spec 19; SQLite's
migration 21)."""
_V13 = """
CREATE TABLE IF NOT EXISTS triggers (
    id             TEXT PRIMARY KEY,
    spec           TEXT NOT NULL,
    secret         TEXT NOT NULL,
    enabled        SMALLINT NOT NULL DEFAULT 1,
    created_at_us  BIGINT NOT NULL,
    updated_at_us  BIGINT NOT NULL,
    fire_count     BIGINT NOT NULL DEFAULT 0,
    last_fire_us   BIGINT,
    last_thread_id TEXT
);
CREATE TABLE IF NOT EXISTS trigger_fires (
    trigger_id     TEXT NOT NULL,
    key            TEXT NOT NULL,
    thread_id      TEXT NOT NULL,
    created_at_us  BIGINT NOT NULL,
    lease_until_us BIGINT NOT NULL,
    done           SMALLINT NOT NULL DEFAULT 0,
    PRIMARY KEY (trigger_id, key)
);
"""
"""Inbound triggers and the claims of their calls (spec 22; SQLite's migration 23)."""

_V14 = f"""
CREATE TABLE IF NOT EXISTS compactions (
    id               {T} PRIMARY KEY,
    thread_id        {T} NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    first_message_id TEXT NOT NULL,
    last_message_id  TEXT NOT NULL,
    message_count    BIGINT NOT NULL,
    summary          TEXT NOT NULL,
    model            TEXT,
    trigger          TEXT NOT NULL,
    input_tokens     BIGINT NOT NULL DEFAULT 0,
    output_tokens    BIGINT NOT NULL DEFAULT 0,
    cost             DOUBLE PRECISION,
    provider_item    TEXT,
    created_at_us    BIGINT NOT NULL,
    undone_at_us     BIGINT
);
CREATE INDEX IF NOT EXISTS compactions_thread ON compactions(thread_id, created_at_us);
"""
"""Compactions: summaries that stand for a range of a thread's messages (spec 23; SQLite's
migration 24)."""

_V12 = f"""
CREATE TABLE IF NOT EXISTS memory_items (
    scope         {T} NOT NULL,
    namespace     {T} NOT NULL,
    key           {T} NOT NULL,
    value         TEXT NOT NULL,
    created_at_us BIGINT NOT NULL,
    updated_at_us BIGINT NOT NULL,
    version       BIGINT NOT NULL DEFAULT 1,
    expires_at_us BIGINT,
    PRIMARY KEY (scope, namespace, key)
);
CREATE INDEX IF NOT EXISTS memory_items_expiry ON memory_items(expires_at_us)
    WHERE expires_at_us IS NOT NULL;
"""
"""The memory store: JSON documents by scope, namespace and key (spec 20; SQLite's migration
22). ``scope``, ``namespace`` and ``key`` compare bytewise (``COLLATE "C"``), as SQLite's: a
namespace prefix is a range of the primary key."""

_V15 = f"""
CREATE TABLE IF NOT EXISTS thread_forks (
    thread_id       {T} PRIMARY KEY REFERENCES threads(id) ON DELETE CASCADE,
    from_thread_id  {T} NOT NULL,
    from_message_id {T} NOT NULL
);
CREATE INDEX IF NOT EXISTS thread_forks_from ON thread_forks(from_thread_id);
"""
"""The thread a fork was made from, and at which message (spec 08 §8.3.8; SQLite's
migration 25)."""
_V16 = """
ALTER TABLE messages ADD COLUMN IF NOT EXISTS search tsvector GENERATED ALWAYS AS (
    CASE WHEN depth = 0 AND silent = 0 AND (role = 'user' OR role = 'assistant')
        AND content <> ''
    THEN to_tsvector('simple'::regconfig, content) END
) STORED;
CREATE INDEX IF NOT EXISTS messages_search ON messages USING GIN (search);
"""
"""The full-text index of message text (spec 08 §8.14; SQLite's migration 26): a generated
``tsvector`` of the visible top-level user and assistant text (``simple`` configuration:
lower-cased words, no stemming, as SQLite's ``unicode61``), computed by the database with
every row written — adding the column computes it for the messages already stored — and a
GIN index over it. A message outside the search has ``NULL``, which the index skips."""

_V17 = """
CREATE OR REPLACE FUNCTION threadloom_stale(code text DEFAULT 'TL001') RETURNS integer
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RAISE EXCEPTION 'a write started from a kept thread state that is out of date (%)', code
        USING ERRCODE = code;
END
$$;
"""
"""The error of a write that started from a kept thread state (``dialect.TxStates``, spec
01 §1.11.2 rule 4) the row has moved past: its first statement calls it when the row's
``xmin`` is not the kept one (``TL001``), a statement whose row count the logic left to the
database when that count is not the expected one (``TL002``). PostgreSQL only (SQLite reads
the row, in process)."""

_V18 = """
ALTER TABLE threads DROP CONSTRAINT IF EXISTS threads_status_state_check;
ALTER TABLE messages DROP CONSTRAINT IF EXISTS messages_role_check;
ALTER TABLE messages DROP CONSTRAINT IF EXISTS messages_tool_status_check;
ALTER TABLE messages DROP CONSTRAINT IF EXISTS messages_status_check;
"""
"""No CHECK constraint on the rows a turn writes: ``threads.status_state`` and
``messages.role``, ``tool_status``, ``status`` (spec 01 §1.11.1 lists none of them). A
message's role and statuses are checked before any write (``thread/validate.py``; an
import's records by their models) and a thread's state is one of the engine's three, so
the checks refused nothing; but PostgreSQL re-reads each
CHECK from its stored node text and plans it at every execution of a statement that writes
the table (``ExecConstraints`` → ``stringToNode``, ``expression_planner``): about 70,000
instructions each time, eight times a turn: 7.7 % of the server's instructions per turn
(docs/benchmarks.md, "The server's per-row work"). SQLite keeps its checks (written as
comparisons by its migration 9, a few instructions each). The constraints of the tables
written rarely (``message_queue``, ``log_bodies``, ``files``, accounts …) stay."""

_V19 = """
DO $$
DECLARE
    col record;
BEGIN
    FOR col IN
        SELECT c.relname, a.attname
        FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
        WHERE c.relnamespace = current_schema()::regnamespace
          AND c.relname IN ('threads', 'messages', 'thread_events', 'tool_calls',
                            'message_queue', 'logs', 'log_bodies', 'log_requests')
          AND a.attnum > 0 AND NOT a.attisdropped
          AND a.atttypid IN ('text'::regtype, 'bytea'::regtype)
        ORDER BY c.relname, a.attnum
    LOOP
        EXECUTE format('ALTER TABLE %I ALTER COLUMN %I SET COMPRESSION lz4',
                       col.relname, col.attname);
    END LOOP;
EXCEPTION WHEN feature_not_supported THEN
    NULL;  -- a server built without lz4 keeps pglz
END
$$;
"""
"""The text and byte columns of the tables a turn writes compress their large values with
lz4 instead of PostgreSQL's default pglz (where the server was built with lz4, as the
packaged builds are; elsewhere nothing changes). A value is compressed when its row
outgrows about 2 kB — in a chat turn, a request row's list of message lengths once the
history is long, and logged request bodies — and pglz spent 3 % of the server's
instructions per turn compressing them at 300 turns (``pglz_compress``); lz4 compresses
the same values in a twentieth of that (docs/benchmarks.md, "The server's per-row work").
Values already stored stay as they are (both methods read back); columns added by later
migrations take the server's ``default_toast_compression``."""

_V20 = """
DO $$
DECLARE
    fk record;
BEGIN
    FOR fk IN
        SELECT c.conrelid::regclass AS tab, c.conname
        FROM pg_constraint c JOIN pg_class r ON r.oid = c.conrelid
        WHERE c.contype = 'f' AND r.relnamespace = current_schema()::regnamespace
          AND r.relname IN ('logs', 'log_requests', 'log_bodies', 'tool_calls',
                            'message_counts')
        ORDER BY r.relname, c.conname
    LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', fk.tab, fk.conname);
    END LOOP;
END
$$;
"""
"""No foreign keys on the rows of a turn that had them: ``logs`` (to its thread and its
message), ``log_requests`` and ``log_bodies`` (to their log row), ``tool_calls`` (to its
thread and its message), ``message_counts`` (to its thread) — as ``messages`` and
``thread_events`` have none. PostgreSQL checked each at every inserted row: an after-trigger
running a query on the parent's key and locking its row (``FOR KEY SHARE``), ~0.3 M server
instructions a turn, about 5 % (docs/benchmarks.md, "The server's per-row work,
continued"). Every row is written in a transaction that holds its thread's row lock (spec
01 §1.11.2 rule 3), which also serves the cascades of spec 01 §1.11.3 now carried out by
the deletes themselves (``store/core``: ``threads.delete_thread`` deletes the thread's rows
of these tables after its own row, ``messages.delete_message`` the deleted messages'
``tool_calls`` rows and unlinks their log rows). SQLite keeps its foreign keys."""

_V21 = """
ALTER TABLE messages ALTER COLUMN search DROP EXPRESSION IF EXISTS;
"""
"""``messages.search`` is a plain column the store's own statements write
(``Dialect.search_vector``: the insert of a message, and an update of its text or of
``silent``), no longer a generated one; the vectors stored stay, and the GIN index over
them and the search's statements are unchanged. PostgreSQL set the generated column's
expression up — read from its stored text and prepared — at every statement that wrote
``messages``, and computed it at every row: 0.35–0.46 M server instructions a turn, about
6 % (docs/benchmarks.md, "The server's per-row work, continued"). An expression index in
its place saved the same but made a search matching tens of thousands of messages ten
times slower (its ranking computed each hit's vector from its text), so the vectors stay
stored. The code of schemas 16 to 20 writes messages without the column and relies on the
database to fill it: still running on the migrated schema, its messages would not be
found."""

MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (1, "initial schema", _V1),
    (2, "the cause of a failed run with its status", _V2),
    (3, "login attempts kept in the store", _V3),
    (4, "the tool-call ledger: approvals and recorded starts", _V4),
    (5, "the resumes of a thread's lost runs", _V5),
    (6, "budgets of threads and quotas of users", _V6),
    (7, "the shared state and the run context of a thread", _V7),
    (8, "the OAuth authorization server's clients, codes and tokens", _V8),
    (9, "the oldest schema version each migration stays compatible with", _V9),
    (10, "schedules and the claims of their fires", _V10),
    (11, "outbound webhooks: subscriptions and the outbox of their deliveries", _V11),
    (12, "the memory store: JSON documents by scope, namespace and key", _V12),
    (13, "inbound triggers and the claims of their calls", _V13),
    (14, "compactions: summaries that stand for a range of a thread's messages", _V14),
    (15, "the thread a fork was made from, and at which message", _V15),
    (16, "the full-text index of message text", _V16),
    (17, "the error of a write started from a thread state that is out of date", _V17),
    (18, "no CHECK constraints on the rows a turn writes", _V18),
    (19, "lz4 compression of the large values a turn writes", _V19),
    (20, "no foreign keys on the rows a turn writes", _V20),
    (21, "the search vector written by the store's statements", _V21),
)
"""(version, name, SQL): applied in order, each in its own transaction."""
LATEST_VERSION = MIGRATIONS[-1][0]

BASELINE = 8
"""The last migration written before the expand/contract rule (spec 17 §17.4): the rule
holds for every migration after it, and no schema claims compatibility further back."""
RULE_FROM = BASELINE + 1
FLOOR_FROM = 9
"""The migration that added ``threadloom_migrations.compatible_down_to``: it and every later
one record their floor."""

CONTRACTIONS: dict[int, Contraction] = {
    # The allow-list of the expand/contract rule: a migration after BASELINE that drops,
    # renames or retypes something, with the oldest schema version whose code no longer
    # uses it and the release that stopped using it, e.g.
    #   15: Contraction(13, "DROP COLUMN threads.overlap: unused since the release of 13"),
    18: Contraction(
        BASELINE,
        "DROP CONSTRAINT threads_status_state_check, messages_role_check,"
        " messages_tool_status_check, messages_status_check: no release relies on them (every"
        " release writes these columns from its records' types), so the code of every release"
        " since the rule keeps working on the database",
    ),
    19: Contraction(
        BASELINE,
        "ALTER COLUMN … SET COMPRESSION lz4 of the turn's tables: only how new large values"
        " are compressed; every release reads both methods, so the code of every release"
        " since the rule keeps working on the database",
    ),
    20: Contraction(
        19,
        "DROP CONSTRAINT … the foreign keys of logs, log_requests, log_bodies, tool_calls and"
        " message_counts: the code this migration comes with (schema 19 before it; no release"
        " of 6 to 19 was cut) deletes those rows with their thread or message itself"
        " (store/core); an older release relies on the keys' ON DELETE CASCADE / SET NULL"
        " and, still running on the migrated schema, would leave a deleted thread's or"
        " message's rows behind",
    ),
    21: Contraction(
        20,
        "ALTER COLUMN messages.search DROP EXPRESSION: the code this migration comes with"
        " (schema 20 before it; no release of 16 to 20 was cut) writes the search vector in"
        " its own statements; an older release relies on the generated column and, still"
        " running on the migrated schema, would store messages no search finds",
    ),
}


def floor_of(version: int) -> int:
    """The oldest schema version whose code can use a database at ``version``."""
    return floor(version, BASELINE, CONTRACTIONS)


def _recorded_floor(conn: psycopg.Connection[Any], version: int) -> int | None:
    """The floor the database records for migration ``version`` (``None``: not recorded,
    a migration of a release before the rule)."""
    has_column = conn.execute(
        "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()"
        " AND table_name = 'threadloom_migrations' AND column_name = 'compatible_down_to'"
    ).fetchone()
    if has_column is None:
        return None
    row = conn.execute(
        "SELECT compatible_down_to FROM threadloom_migrations WHERE version = %s", (version,)
    ).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def _schema_of(conn: psycopg.Connection[Any]) -> str:
    schema = conn.execute("SELECT current_schema()").fetchone()
    if schema is None or schema[0] is None:
        raise psycopg.errors.InvalidSchemaName(
            "no schema to create the tables in: the search_path names none that exists"
            " and that this role may use (USAGE)"
        )
    return str(schema[0])


def plan(conn: psycopg.Connection[Any]) -> Plan:
    """What :func:`migrate` would apply to ``conn``'s schema, changing nothing;
    ``SchemaTooNew`` for a newer schema this code cannot use. ``conn`` is in autocommit
    mode."""
    _schema_of(conn)
    known = conn.execute("SELECT to_regclass('threadloom_migrations')").fetchone()
    done = (
        {int(r[0]) for r in conn.execute("SELECT version FROM threadloom_migrations")}
        if known is not None and known[0] is not None
        else set()
    )
    current = max(done, default=0)
    recorded = _recorded_floor(conn, current) if current > LATEST_VERSION else None
    check_newer(current, recorded, LATEST_VERSION)
    pending = [(v, name) for v, name, _ in MIGRATIONS if v not in done and v > current]
    return Plan("postgresql", current, LATEST_VERSION, pending, recorded)


def _lock_key(conn: psycopg.Connection[Any]) -> int:
    """The advisory lock of this schema's migrations (one per schema of the database)."""
    row = conn.execute("SELECT hashtext('threadloom-migrate:' || current_schema())").fetchone()
    assert row is not None
    return int(row[0])


def migrate(conn: psycopg.Connection[Any]) -> int:
    """Apply the migrations not yet recorded, holding the schema's advisory lock so that
    nodes starting at once migrate once (the others wait, then find nothing to do);
    returns the schema version. A schema newer than this code is used as it is when its
    newest migration stays compatible with this version, else refused (``SchemaTooNew``).
    ``conn`` is in autocommit mode."""
    _schema_of(conn)
    key = _lock_key(conn)
    conn.execute("SELECT pg_advisory_lock(%s)", (key,))
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS threadloom_migrations ("
            " version BIGINT PRIMARY KEY, name TEXT NOT NULL,"
            " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        done = {int(r[0]) for r in conn.execute("SELECT version FROM threadloom_migrations")}
        newest = max(done, default=0)
        if newest > LATEST_VERSION:
            check_newer(newest, _recorded_floor(conn, newest), LATEST_VERSION)
            return newest
        for version, name, sql in MIGRATIONS:
            if version in done:
                continue
            with conn.transaction():
                conn.execute(sql.encode())
                conn.execute(
                    "INSERT INTO threadloom_migrations(version, name) VALUES (%s, %s)",
                    (version, name),
                )
                if version >= FLOOR_FROM:
                    conn.execute(
                        "UPDATE threadloom_migrations SET compatible_down_to = %s"
                        " WHERE version = %s",
                        (floor_of(version), version),
                    )
        return max(done | {v for v, _, _ in MIGRATIONS})
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
