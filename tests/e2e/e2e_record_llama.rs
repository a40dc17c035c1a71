//! End-to-end: `LlamaServer` starts a real llama-server, answers `/health`, `/props` and logs.
use crate::support;

use toolscope::record::llama::{LlamaOptions, LlamaServer};

#[test]
#[ignore = "e2e: needs llama-server"]
fn llama_server_starts_reports_props_and_stops() {
    let (Some(_bin), Some(model)) = (support::llama_server(), support::smollm2()) else {
        return;
    };
    let mut server = LlamaServer::start(LlamaOptions {
        model,
        chat_template_file: None,
        verbose: false,
        extra_args: vec![],
        ctx: 2048,
    })
    .expect("llama-server starts");
    let url = server.base_url();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let props = rt
        .block_on(toolscope::record::client::ServerClient::new(&url).props())
        .expect("/props");
    // Built by scripts/setup.sh with -DLLAMA_BUILD_NUMBER=11434.
    assert!(
        props["build_info"].as_str().unwrap_or("").contains("11434"),
        "{props}"
    );
    assert!(
        props["model_path"]
            .as_str()
            .unwrap_or("")
            .ends_with(".gguf"),
        "{props}"
    );
    assert!(server.log_path().exists());
    assert!(!server.log_text().is_empty());
    let port = server.port();
    server.stop();
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "server still listening after stop"
    );
}
