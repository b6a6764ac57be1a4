// Package catalog embeds the platform's message catalogue: catalog.yaml with
// every definition and one JSON Schema file per type.
package catalog

import "embed"

// FS holds catalog.yaml and <domain>/<type>.json.
//
//go:embed catalog.yaml */*.json
var FS embed.FS
