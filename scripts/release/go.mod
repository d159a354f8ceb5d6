module github.com/celebrity-go/celebrity/scripts/release

// go 1.26: golang.org/x/mod v0.43.0 declares go 1.26 (a release tool, never imported).
go 1.26.0

require golang.org/x/mod v0.43.0
