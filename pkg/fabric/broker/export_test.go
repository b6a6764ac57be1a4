package broker

// SplitURLs is splitURLs for the package's external tests.
var SplitURLs = splitURLs
