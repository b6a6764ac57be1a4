// Package migrations holds the workflow service's goose migrations; the
// fabric host applies them after its own tables.
package migrations

import (
	"embed"
	"io/fs"
)

//go:embed *.sql
var files embed.FS

// FS returns the migration files.
func FS() fs.FS { return files }
