// Package imoveis is the message catalog of the real-estate listing
// system (seed 003), a system of its own on the event fabric: catalog.yaml
// and one JSON Schema per type, as package catalog is the platform's. Its
// topology is deploy/topologies/imoveis.yaml, its wire format
// codec.Imoveis.
package imoveis

import (
	"embed"

	"github.com/agora-platform/agora/pkg/fabric/registry"
)

// FS holds catalog.yaml and <domain>/<type>.json.
//
//go:embed catalog.yaml */*.json
var FS embed.FS

// Registry loads the catalog.
func Registry() (*registry.Registry, error) { return registry.Load(FS) }
