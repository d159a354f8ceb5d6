// Package hosttest is a host's own test suite, written as a service using celebrity would
// write it: it imports only public packages (the library, its test kit celebritytest and
// celebritytest/faults) and checks a guarantee the service relies on against real
// redis-server processes that the kit starts, with the faults the kit injects.
//
// Run it with `go test ./hosttest` from the examples module; it needs redis-server on PATH
// or REDIS_SERVER set to a server binary (scripts/servers.sh installs other versions).
package hosttest
