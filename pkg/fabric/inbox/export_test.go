package inbox

// PayloadHash is payloadHash for the package's external tests.
var PayloadHash = payloadHash
