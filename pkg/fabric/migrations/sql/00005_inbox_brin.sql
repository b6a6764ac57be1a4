-- +goose Up
-- Claims arrive in time order, so a BRIN index serves the retention scan at
-- a fraction of a B-tree's cost on every claim (the inbox is on the hot
-- path of every consumer).
DROP INDEX inbox_message_received_at;
CREATE INDEX inbox_message_received_at ON inbox_message USING brin (received_at);

-- +goose Down
DROP INDEX inbox_message_received_at;
CREATE INDEX inbox_message_received_at ON inbox_message (received_at);
