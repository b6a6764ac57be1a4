// Package migrations holds the ai-builder's goose migrations; the host
// applies them after the fabric's tables.
package migrations

import "embed"

// FS is the migration files.
//
//go:embed *.sql
var FS embed.FS
