package ratelimit

// NewShared is newShared for the package's external tests.
var NewShared = newShared
