package escrow

// ExampleAddr and ExampleWitnessAddr are the servers the examples use for ledgers and for
// witnesses, started by TestMain with appendfsync always.
var ExampleAddr, ExampleWitnessAddr string
