package keyset

// ErrCursor is errCursor, for the external tests.
var ErrCursor = errCursor
