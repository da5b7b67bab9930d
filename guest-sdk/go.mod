module github.com/mandatevm/mandate/guest-sdk

go 1.26.0
