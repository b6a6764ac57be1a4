package topology

// FromCatalog is fromCatalog for the package's external tests.
var FromCatalog = fromCatalog
