-- +goose Up
-- Every dead-letter operation: who, when, why, which messages, result.
CREATE TABLE dlq_audit (
    id          bigserial PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    operator    text        NOT NULL CHECK (operator <> ''),
    reason      text        NOT NULL CHECK (reason <> ''),
    action      text        NOT NULL,  -- replay | replay-dry-run | purge
    queue       text        NOT NULL,
    filter      text        NOT NULL,
    message_ids text[]      NOT NULL,
    succeeded   integer     NOT NULL,
    failed      integer     NOT NULL,
    result      text        NOT NULL
);

-- +goose Down
DROP TABLE dlq_audit;
