"""The records floor: the persisted shapes of threads, messages, logs, files and cost, and
their identifiers — plain typed data, no I/O. This package is their one import place
(``from threadloom.records import Message``); its modules hold one concept each:

- ``message``: attachments, tool calls, messages, queue entries, the messages page, the
  owner's handle (spec 01);
- ``thread``: the thread's record, run status and its reasons, the subagent registry;
- ``log``: log rows and request deltas (spec 05);
- ``cost``: the cost report (spec 05);
- ``budget``: budgets, user quotas and the spend they limit (spec 15);
- ``file``: file records and listings (spec 06);
- ``ids``: identifiers (canonical UUID4s, tool-call ids);
- ``oauth``: the OAuth authorization server's clients, codes and tokens (spec 10 §10.15);
- ``webhook``: outbound webhooks' subscriptions and deliveries (spec 19);
- ``schedule``: schedules and their firing state (spec 18);
- ``trigger``: inbound triggers and their calls (spec 22);
- ``memory``: the memory store's items and the rules of their namespaces, keys and values
  (spec 20);
- ``compaction``: a durable compaction of a thread's history (spec 23);
- ``trusted``: records built or copied without validation from values already typed, and
  the fields set every stored record of a kind shares — how the store and the engine build
  records, not what they are.
"""

from threadloom.records.approval import APPROVAL_STATES as APPROVAL_STATES
from threadloom.records.approval import Approval as Approval
from threadloom.records.approval import ApprovalDecision as ApprovalDecision
from threadloom.records.approval import ApprovalState as ApprovalState
from threadloom.records.approval import arguments_hash as arguments_hash
from threadloom.records.approval import canonical_json as canonical_json
from threadloom.records.budget import Budget as Budget
from threadloom.records.budget import Limits as Limits
from threadloom.records.budget import Spend as Spend
from threadloom.records.budget import ThreadBudget as ThreadBudget
from threadloom.records.budget import UserQuota as UserQuota
from threadloom.records.compaction import Compaction as Compaction
from threadloom.records.cost import CostReport as CostReport
from threadloom.records.cost import ModelAverage as ModelAverage
from threadloom.records.cost import ModelCost as ModelCost
from threadloom.records.cost import ThreadCost as ThreadCost
from threadloom.records.file import DIRECTORY_MIME as DIRECTORY_MIME
from threadloom.records.file import FileChunk as FileChunk
from threadloom.records.file import FileRecord as FileRecord
from threadloom.records.file import FileStats as FileStats
from threadloom.records.file import GrepResult as GrepResult
from threadloom.records.file import ReaddirResult as ReaddirResult
from threadloom.records.file import name_of as name_of
from threadloom.records.file import parent_of as parent_of
from threadloom.records.ids import is_uuid as is_uuid
from threadloom.records.ids import new_call_id as new_call_id
from threadloom.records.ids import new_id as new_id
from threadloom.records.log import LOG_COLUMNS as LOG_COLUMNS
from threadloom.records.log import LOG_LIST_KEYS as LOG_LIST_KEYS
from threadloom.records.log import LogRow as LogRow
from threadloom.records.log import RequestDelta as RequestDelta
from threadloom.records.log import ThreadLogEntry as ThreadLogEntry
from threadloom.records.memory import MemoryItem as MemoryItem
from threadloom.records.message import METADATA_MAX_BYTES as METADATA_MAX_BYTES
from threadloom.records.message import PROJECTED_FIELDS as PROJECTED_FIELDS
from threadloom.records.message import QUEUE_ROLES as QUEUE_ROLES
from threadloom.records.message import QUEUE_SOURCES as QUEUE_SOURCES
from threadloom.records.message import RESERVED_METADATA_KEYS as RESERVED_METADATA_KEYS
from threadloom.records.message import ROLES as ROLES
from threadloom.records.message import AttachmentRef as AttachmentRef
from threadloom.records.message import Message as Message
from threadloom.records.message import MessagesPage as MessagesPage
from threadloom.records.message import MessageStatus as MessageStatus
from threadloom.records.message import QueueEntry as QueueEntry
from threadloom.records.message import QueueRole as QueueRole
from threadloom.records.message import QueueSource as QueueSource
from threadloom.records.message import Role as Role
from threadloom.records.message import ToolCall as ToolCall
from threadloom.records.message import ToolCallFunction as ToolCallFunction
from threadloom.records.message import ToolStatus as ToolStatus
from threadloom.records.message import UserHandle as UserHandle
from threadloom.records.message import decode_tool_calls as decode_tool_calls
from threadloom.records.message import encode_tool_calls as encode_tool_calls
from threadloom.records.message import json_compact as json_compact
from threadloom.records.message import normalize_tool_calls as normalize_tool_calls
from threadloom.records.oauth import OAuthClient as OAuthClient
from threadloom.records.oauth import OAuthCode as OAuthCode
from threadloom.records.oauth import OAuthToken as OAuthToken
from threadloom.records.schedule import FireStatus as FireStatus
from threadloom.records.schedule import Schedule as Schedule
from threadloom.records.schedule import ScheduleRow as ScheduleRow
from threadloom.records.thread import ERROR_LINE_MAX as ERROR_LINE_MAX
from threadloom.records.thread import FAILED_REASONS as FAILED_REASONS
from threadloom.records.thread import REASON_ERRORS as REASON_ERRORS
from threadloom.records.thread import RUN_CONTEXT_MAX_BYTES as RUN_CONTEXT_MAX_BYTES
from threadloom.records.thread import SHARED_STATE_MAX_BYTES as SHARED_STATE_MAX_BYTES
from threadloom.records.thread import ContextEntry as ContextEntry
from threadloom.records.thread import RunState as RunState
from threadloom.records.thread import SharedState as SharedState
from threadloom.records.thread import StatusError as StatusError
from threadloom.records.thread import SubagentRegistryEntry as SubagentRegistryEntry
from threadloom.records.thread import ThreadRecord as ThreadRecord
from threadloom.records.thread import ThreadStatus as ThreadStatus
from threadloom.records.thread import one_line as one_line
from threadloom.records.thread import state_json as state_json
from threadloom.records.thread import thread_name as thread_name
from threadloom.records.trigger import Trigger as Trigger
from threadloom.records.trigger import TriggerFire as TriggerFire
from threadloom.records.trigger import TriggerRow as TriggerRow
from threadloom.records.trusted import MESSAGE_FIELDS_SET as MESSAGE_FIELDS_SET
from threadloom.records.trusted import AllFieldsSet as AllFieldsSet
from threadloom.records.trusted import SharedFieldsSet as SharedFieldsSet
from threadloom.records.trusted import SharingModel as SharingModel
from threadloom.records.trusted import blank as blank
from threadloom.records.trusted import copy_with as copy_with
from threadloom.records.trusted import trusted as trusted
from threadloom.records.webhook import WEBHOOK_EVENT_TYPES as WEBHOOK_EVENT_TYPES
from threadloom.records.webhook import WebhookDelivery as WebhookDelivery
from threadloom.records.webhook import WebhookSubscription as WebhookSubscription
from threadloom.records.webhook import new_webhook_secret as new_webhook_secret
