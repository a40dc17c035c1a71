// llama-parse: llama-server's own chat-template and tool-call parser code (libllama-common),
// driven the way llama-server drives it for a non-streamed /v1/chat/completions request with
// `tools` and `tool_choice: "auto"`, on raw model texts given on stdin.
//
// Built by scripts/engines/llama/build.sh against the b11434 source (~/.cache/toolscope/src/llama.cpp)
// and b11312 (~/.cache/toolscope/src/llama.cpp-11312); the two releases share this API.
// Line numbers below are b11434's.
//
// Usage: llama-parse TEMPLATE.jinja < request.json > results.json
//   request.json: {"messages": [...], "tools": [...], "texts": ["raw text", ...]}
//   results.json: {"format": "peg-native", "generation_prompt": "...",
//                  "results": [{"content": "...", "reasoning_content": "...",
//                               "tool_calls": [{"name": "...", "arguments": "..."}]}
//                              | {"error": "<what the server answers with HTTP 500>"}, ...]}
// Exit 2 when the template or the request cannot be read (message on stderr).

#include "chat.h"
#include "json.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

int main(int argc, char ** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s TEMPLATE.jinja < request.json\n", argv[0]);
        return 2;
    }
    std::ifstream tf(argv[1]);
    if (!tf) {
        fprintf(stderr, "%s: cannot read\n", argv[1]);
        return 2;
    }
    std::stringstream ts;
    ts << tf.rdbuf();
    std::stringstream in;
    in << std::cin.rdbuf();

    try {
        common_json req = common_json::parse(in.str());

        // Server start (tools/server/server-context.cpp:1585-1623): the template given with
        // --chat-template-file replaces the model's; no model here, so BOS/EOS are empty
        // (server-context passes the vocab's; they only change the rendered prompt's ends).
        // enable_thinking = enable_reasoning (default -1, "auto") != 0 && template supports it
        // (server-context.cpp:1596-1597).
        common_chat_templates_ptr tmpls = common_chat_templates_init(nullptr, ts.str(), "", "");
        const bool enable_thinking      = common_chat_templates_support_enable_thinking(tmpls.get());

        // Request (tools/server/server-common.cpp:1265 oaicompat_chat_params_parse).
        auto caps = common_chat_templates_get_caps(tmpls.get());  // :1353
        common_chat_templates_inputs inputs;
        inputs.messages              = common_chat_msgs_parse_oaicompat(req.at("messages"));  // :1356
        inputs.tools                 = common_chat_tools_parse_oaicompat(req.at("tools"));    // :1357
        inputs.tool_choice           = common_chat_tool_choice_parse_oaicompat("auto");       // :1358
        inputs.json_schema           = "";
        inputs.grammar               = "";
        inputs.use_jinja             = true;  // --jinja (default on)
        inputs.parallel_tool_calls   = caps["supports_parallel_tool_calls"];  // :1362
        inputs.add_generation_prompt = true;                                   // :1363
        // An assistant message last is a prefill (--prefill-assistant, default on;
        // server-common.cpp:1367-1374): the model continues it, and the prefill ends up in
        // the generation prompt the parser is given.
        if (!inputs.messages.empty() && inputs.messages.back().role == "assistant") {
            if (inputs.messages.size() >= 2 && inputs.messages[inputs.messages.size() - 2].role == "assistant") {
                throw std::invalid_argument("Cannot have 2 or more assistant messages at the end of the list.");
            }
            inputs.continue_final_message = COMMON_CHAT_CONTINUATION_AUTO;
            inputs.add_generation_prompt  = false;
        }
        // common_params.reasoning_format default DEEPSEEK (common/common.h:655) via
        // server_chat_params.reasoning_format (server-context.cpp:1612), :1384.
        inputs.reasoning_format   = COMMON_REASONING_FORMAT_DEEPSEEK;
        inputs.enable_thinking    = enable_thinking;  // :1388
        inputs.force_pure_content = false;            // --force-pure-content-parser off, :1424

        auto chat_params = common_chat_templates_apply(tmpls.get(), inputs);  // :1427

        // Task params (tools/server/server-schema.cpp): chat_format :298, reasoning_format
        // (server default, :539; reasoning_in_content = stream && deepseek-legacy = false, :557),
        // generation_prompt :314, parse_tool_calls = true (server-common.cpp:1393), chat_parser
        // string loaded into the PEG arena :324.
        common_chat_parser_params pp;
        pp.format               = chat_params.format;
        pp.reasoning_format     = COMMON_REASONING_FORMAT_DEEPSEEK;
        pp.reasoning_in_content = false;
        pp.generation_prompt    = chat_params.generation_prompt;
        pp.parse_tool_calls     = true;
        if (!chat_params.parser.empty()) {
            pp.parser.load(chat_params.parser);
        }

        common_json out = common_json::object();
        out["format"]            = std::string(common_chat_format_name(pp.format));
        out["generation_prompt"] = chat_params.generation_prompt;
        common_json results      = common_json::array();
        const auto & texts       = req.at("texts");
        for (size_t i = 0; i < texts.size(); i++) {
            const std::string text = texts[i].get<std::string>();
            common_json r          = common_json::object();
            try {
                // Final result of a non-streamed completion: tools/server/server-task.h:399
                // state.update_chat_msg(content, /*is_partial*/ false, …) → server-task.cpp:170
                // common_chat_parse(generated_text, false, chat_parser_params). An exception here
                // becomes the HTTP 500 body's message.
                common_chat_msg msg = common_chat_parse(text, false, pp);
                r["content"]           = msg.content;
                r["reasoning_content"] = msg.reasoning_content;
                common_json calls      = common_json::array();
                for (const auto & tc : msg.tool_calls) {
                    common_json c  = common_json::object();
                    c["name"]      = tc.name;
                    c["arguments"] = tc.arguments;
                    calls.push_back(c);
                }
                r["tool_calls"] = calls;
            } catch (const std::exception & e) {
                r["error"] = std::string(e.what());
            }
            results.push_back(r);
        }
        out["results"] = results;
        std::cout << out.dump() << std::endl;
    } catch (const std::exception & e) {
        fprintf(stderr, "llama-parse: %s\n", e.what());
        return 2;
    }
    return 0;
}
