package payload

import "github.com/agora-platform/agora/pkg/fabric/enum"

// ServiceUpdated is catalog.service-updated.v1: a service of the tenant's
// catalog changed.
type ServiceUpdated struct {
	ServiceID        string                   `json:"serviceId"`
	Change           enum.Open[ServiceChange] `json:"change"`
	RequiredDocument string                   `json:"requiredDocument,omitempty"`
	Description      string                   `json:"description,omitempty"`
}

// MessageType returns the catalog type of the payload.
func (ServiceUpdated) MessageType() string { return "catalog.service-updated.v1" }

// ServiceChange is what changed in a service (extensible: a reader must
// accept values it does not know).
type ServiceChange string

// Known reports whether c is a change this build was written for.
func (c ServiceChange) Known() bool {
	switch c {
	case "requires-document", "form-changed", "retired":
		return true
	}
	return false
}
