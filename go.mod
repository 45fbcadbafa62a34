module github.com/mvm-dev/mvm

go 1.26.8

require (
	github.com/c35s/hype v0.0.0-20240219193225-9c233c6170bc // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/spf13/cobra v1.10.2 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/term v0.16.0 // indirect
)
