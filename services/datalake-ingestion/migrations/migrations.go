// Package migrations holds the datalake-ingestion schema's goose migrations.
package migrations

import (
	"embed"
	"io/fs"
)

//go:embed *.sql
var files embed.FS

// FS returns the migration files, for host.Options.Migrations.
func FS() fs.FS { return files }
