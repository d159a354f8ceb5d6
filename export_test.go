package celebrity

// ExampleAddr is the address of the standalone server the runnable examples use, started by
// TestMain.
var ExampleAddr string
