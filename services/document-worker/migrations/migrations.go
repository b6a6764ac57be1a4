// Package migrations holds the document worker's goose migrations; the
// host applies them after the fabric's tables.
package migrations

import "embed"

// FS is the migration files.
//
//go:embed *.sql
var FS embed.FS
