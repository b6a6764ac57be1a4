package outbox

// ThrottledError is throttledError, for the external tests.
type ThrottledError = throttledError
