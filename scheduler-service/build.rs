//! Generates the gRPC code from `proto/` with protox (pure Rust, no protoc binary)
//! and tonic-prost-build, and writes the file descriptor set used by server reflection.

use std::{env, path::PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_root = PathBuf::from("../proto");
    let file = proto_root.join("placement/v1/placement.proto");
    println!("cargo:rerun-if-changed={}", proto_root.display());

    let fds = protox::compile([&file], [&proto_root])?;
    let out = PathBuf::from(env::var("OUT_DIR")?);
    std::fs::write(
        out.join("placement_descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
    )?;

    tonic_prost_build::configure().btree_map(".").compile_fds(fds)?;
    Ok(())
}
