// Package httpapi is the document worker's HTTP surface: no routes of its
// own, only its OpenAPI document, which the host completes with its routes
// (/healthz, /readyz, /metrics, /openapi.json, the DLQ API) and serves.
package httpapi

import _ "embed"

// OpenAPI is the service's OpenAPI 3.1 document (YAML), written by hand;
// see host.Options.OpenAPI.
//
//go:embed openapi.yaml
var OpenAPI []byte
