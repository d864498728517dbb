module github.com/latent-node/latent-node/bench/peers/wasmtime

go 1.26.0

require github.com/bytecodealliance/wasmtime-go/v39 v39.0.1
