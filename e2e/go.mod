module github.com/agora-platform/agora/e2e

go 1.26
