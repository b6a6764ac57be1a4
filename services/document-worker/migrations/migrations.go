// Package migrations holds the document worker's goose migrations; the
// host applies them after the fabric's tables.
package migrations

import (
	"embed"
	"io/fs"
)

//go:embed *.sql
var files embed.FS

// FS returns the migration files.
func FS() fs.FS { return files }
