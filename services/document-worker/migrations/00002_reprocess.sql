-- +goose Up
-- What reprocessing a document (document.process.v1, which names only the
-- document) needs to read it again as it was announced: its checksum and
-- file name. Rows from before this migration have neither; reprocessing
-- them is refused with that reason (replay their upload event instead).
ALTER TABLE document_text
    ADD COLUMN sha256    text NOT NULL DEFAULT '',
    ADD COLUMN file_name text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE document_text DROP COLUMN file_name, DROP COLUMN sha256;
