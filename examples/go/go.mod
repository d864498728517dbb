module github.com/latent-node/latent-node/examples/go

go 1.24
