package openapitest

// Probe and MismatchError are probe and mismatchError for the package's
// external tests.
var Probe = probe

type MismatchError = mismatchError
