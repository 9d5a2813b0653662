//! The offline model: reads a skill, then answers, always the same way.

use clawless_base::model::{ModelProvider, ModelRequest};
use clawless_base::transcript::{AssistantBlock, Message, StopReason};
use clawless_llm::OfflineModel;
use serde_json::json;

use crate::support::{exec_tool, read_tool, request, user};

const SYSTEM: &str = "You are a personal assistant.\n\n\
The following skills provide specialized instructions for specific tasks.\n\
<available_skills>\n  <skill>\n    <name>github</name>\n    <description>Work with GitHub issues and pull requests</description>\n    <location>/skills/github/SKILL.md</location>\n  </skill>\n  <skill>\n    <name>weather</name>\n    <description>Get current weather and forecasts</description>\n    <location>/skills/weather/SKILL.md</location>\n  </skill>\n</available_skills>\n";

const WEATHER_SKILL: &str = "---\nname: weather\ndescription: Get current weather and forecasts\n---\n\n# Weather\n\nUse wttr.in for quick lookups.\n";

async fn run(model: &OfflineModel, request: &ModelRequest) -> (Vec<AssistantBlock>, StopReason) {
    let response = model.complete(request).await.expect("offline never fails");
    assert_eq!(response.model, "offline/scripted");
    (response.content, response.stop_reason)
}

#[tokio::test]
async fn offline_model_reads_the_matching_skill_then_answers() {
    let model = OfflineModel::new();
    assert_eq!(model.model_ref(), "offline/scripted");
    let tools = vec![read_tool(), exec_tool()];

    // WHEN the user asks about the weather
    let mut messages = vec![user("What's the weather forecast for Paris?")];
    let (content, stop) = run(&model, &request(SYSTEM, messages.clone(), tools.clone())).await;
    // THEN it calls read on the weather skill's location
    assert_eq!(stop, StopReason::ToolUse);
    let [AssistantBlock::ToolCall(call)] = content.as_slice() else {
        panic!("expected one tool call, got {content:?}");
    };
    assert_eq!(call.name, "read");
    assert_eq!(call.input, json!({ "path": "/skills/weather/SKILL.md" }));

    // WHEN the skill file comes back
    messages.push(Message::Assistant {
        content: content.clone(),
        stop_reason: stop,
    });
    messages.push(Message::ToolResult {
        tool_call_id: call.id.clone(),
        tool_name: "read".into(),
        text: WEATHER_SKILL.into(),
        is_error: false,
    });
    let (answer, stop) = run(&model, &request(SYSTEM, messages.clone(), tools.clone())).await;
    // THEN it answers with a labelled summary
    assert_eq!(stop, StopReason::EndTurn);
    assert_eq!(
        answer,
        vec![AssistantBlock::Text {
            text: "[offline model] I read the weather skill (8 lines). It says: Weather. \
                   Configure a model key (ANTHROPIC_API_KEY or OPENAI_API_KEY) for real answers."
                .into()
        }]
    );

    // AND a replay gives the same conversation
    let again = run(&model, &request(SYSTEM, messages, tools)).await.0;
    assert_eq!(again, answer);
}

#[tokio::test]
async fn offline_model_takes_the_first_skill_when_nothing_matches() {
    let (content, _) = run(
        &OfflineModel::new(),
        &request(SYSTEM, vec![user("hello")], vec![read_tool()]),
    )
    .await;
    assert!(
        matches!(&content[0], AssistantBlock::ToolCall(call) if call.input == json!({ "path": "/skills/github/SKILL.md" }))
    );
}

#[tokio::test]
async fn offline_model_without_skills_echoes_with_a_label() {
    let (content, stop) = run(
        &OfflineModel::new(),
        &request("Plain prompt.", vec![user("ping")], vec![]),
    )
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    let [AssistantBlock::Text { text }] = content.as_slice() else {
        panic!("expected text, got {content:?}");
    };
    assert!(
        text.starts_with("[offline model] You said: \"ping\"."),
        "{text}"
    );
    assert!(text.ends_with("for real answers."), "{text}");
}

#[tokio::test]
async fn offline_model_reports_a_failed_read() {
    let messages = vec![
        user("weather please"),
        Message::Assistant {
            content: vec![AssistantBlock::ToolCall(crate::support::tool_call(
                "offline_call_1",
                "read",
                json!({ "path": "/skills/weather/SKILL.md" }),
            ))],
            stop_reason: StopReason::ToolUse,
        },
        Message::ToolResult {
            tool_call_id: "offline_call_1".into(),
            tool_name: "read".into(),
            text: "ENOENT: no such file".into(),
            is_error: true,
        },
    ];
    let (content, _) = run(
        &OfflineModel::new(),
        &request(SYSTEM, messages, vec![read_tool()]),
    )
    .await;
    assert!(
        matches!(&content[0], AssistantBlock::Text { text } if text.starts_with("[offline model] I tried to read the weather skill, but the read failed: ENOENT: no such file."))
    );
}
