package httpapi

import _ "embed"

// OpenAPI is the service's OpenAPI 3.1 document (YAML), written by hand:
// its own routes, referring to the components package openapi shares. The
// host merges it with its own routes and serves it at /openapi.json
// (host.Options.OpenAPI); TestOpenAPIDocument keeps it to the router's
// routes and the service's tests keep it to what the handlers answer.
//
//go:embed openapi.yaml
var OpenAPI []byte
