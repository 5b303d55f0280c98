module github.com/simba-project/simba/bindings/go

go 1.19
