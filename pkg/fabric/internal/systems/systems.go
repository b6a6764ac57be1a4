// Package systems wires the systems that run on the event fabric to their
// message catalogs: the platform (package catalog), CAR (package
// systems/car) and imóveis (package systems/imoveis). A topology file
// names its system (name) and wire format (codec); codec.For gives the
// codec, Registry the catalog. docs/topologies.md shows how a system is
// added.
package systems

import (
	"fmt"

	"github.com/agora-platform/agora/pkg/fabric/internal/systems/car"
	"github.com/agora-platform/agora/pkg/fabric/internal/systems/imoveis"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// Registry returns the catalog of the system d describes (by its name):
// the platform's for "platform" or no name, CAR's, or imóveis'. Another
// name is an error.
func Registry(d topology.Description) (*registry.Registry, error) {
	switch d.Name {
	case "", "platform":
		return registry.Default()
	case "car":
		return car.Registry()
	case "imoveis":
		return imoveis.Registry()
	}
	return nil, fmt.Errorf("systems: no catalog for topology %q", d.Name)
}
