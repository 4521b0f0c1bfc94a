//! What the console draws, pane by pane and state by state, at the smallest supported terminal
//! (80×24) and a large one (160×48). No network: each test plays the job runner by answering
//! the app's queued jobs with fixed data (fixed timestamps and ETags, spinner frame 0).

#[path = "console_common/mod.rs"]
mod common;

use crossterm::event::KeyCode;
use tabletop::azure::EntityPage;
use tabletop::console::app::{App, Source};
use tabletop::console::event::{Event, JobOutput};

use common::*;

const SIZES: [(u16, u16); 2] = [(80, 24), (160, 48)];

/// Builds the state afresh for each size and snapshots the screen as `NAME_WxH`.
fn snapshot(name: &str, build: impl Fn() -> App) {
    for (w, h) in SIZES {
        let mut app = build();
        let terminal = render(&mut app, w, h);
        insta::assert_snapshot!(format!("{name}_{w}x{h}"), terminal.backend());
    }
}

fn order_tables() -> Vec<&'static str> {
    vec!["Audit", "Customers", "OrderLines", "Orders", "Sessions"]
}

// ---- tables pane ------------------------------------------------------------------------

#[test]
fn tables_pane_while_the_first_page_of_names_loads() {
    snapshot("tables_loading", || {
        app(vec![source("dev"), source("staging")])
    });
}

#[test]
fn tables_pane_with_a_few_tables_and_a_source_with_many() {
    snapshot("tables_loaded", || {
        let mut a = app(vec![
            Source::new("prod", Ok(client()), false, Some("red".into())),
            source("staging"),
        ]);
        answer_tables(&mut a, &order_tables(), None);
        type_command(&mut a, "profile staging");
        let many: Vec<String> = (0..120).map(|i| format!("Telemetry{i:04}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        // The first page says more exist: the count shows "+" and the next page loads.
        answer_tables(&mut a, &many, Some("Telemetry0120"));
        a
    });
}

#[test]
fn tables_pane_when_listing_fails_with_an_authentication_error() {
    snapshot("tables_list_error", || {
        let mut a = app(vec![source("prod"), source("staging")]);
        let job = only_list_tables(&mut a);
        a.update(Event::Job(
            job,
            JobOutput::Tables(Err(
                "The service rejected the signature: check the account key \
                 (rotated?) and this machine's clock. (HTTP 403 AuthenticationFailed; request id \
                 5c1e0d2a-0002-0041-3f1b-0a5b2c000000)"
                    .into(),
            )),
        ));
        a
    });
}

#[test]
fn tables_pane_for_a_source_whose_connection_string_failed() {
    snapshot("tables_bad_connection_string", || {
        app(vec![
            Source::new(
                "broken",
                Err("connection string: AccountKey is missing".into()),
                false,
                None,
            ),
            source("dev"),
        ])
    });
}

#[test]
fn tables_pane_and_status_bar_badge_a_read_only_profile() {
    snapshot("tables_read_only", || {
        let mut a = app(vec![Source::new(
            "prod",
            Ok(client()),
            true,
            Some("red".into()),
        )]);
        answer_tables(&mut a, &order_tables(), None);
        a
    });
}

#[test]
fn tables_pane_with_the_search_filter_applied() {
    snapshot("tables_filtered", || {
        let mut a = app_with_tables(&order_tables());
        press_char(&mut a, '/');
        type_text(&mut a, "order");
        press(&mut a, KeyCode::Enter);
        a
    });
}

// ---- grid -------------------------------------------------------------------------------

#[test]
fn grid_with_no_table_open_shows_how_to_open_one() {
    snapshot("grid_no_table", || app_with_tables(&order_tables()));
}

#[test]
fn grid_while_the_first_page_loads() {
    snapshot("grid_loading", || {
        let mut a = app_with_tables(&order_tables());
        type_command(&mut a, "table Orders");
        a
    });
}

#[test]
fn grid_while_empty_pages_are_skipped() {
    snapshot("grid_scanning", || {
        let mut a = app_with_tables(&order_tables());
        type_command(&mut a, "table Orders");
        let (job, _, _) = only_query(&mut a);
        a.update(Event::Job(job, JobOutput::Scanned(37)));
        a
    });
}

#[test]
fn grid_shows_every_edm_type_exactly() {
    snapshot("grid_typed_rows", || {
        let mut a = app_with_tables(&order_tables());
        open_with_page(
            &mut a,
            "Orders",
            EntityPage {
                entities: typed_rows(),
                continuation: None,
            },
        );
        a
    });
}

#[test]
fn grid_on_the_second_page() {
    snapshot("grid_second_page", || {
        let mut a = app_with_tables(&order_tables());
        open_with_page(&mut a, "Orders", page(0, 1000, true));
        press_char(&mut a, 'n');
        let (job, _, _) = only_query(&mut a);
        answer_page(&mut a, job, page(1000, 1000, true));
        a
    });
}

#[test]
fn grid_of_an_empty_table() {
    snapshot("grid_empty_table", || {
        let mut a = app_with_tables(&order_tables());
        open_with_page(&mut a, "Orders", page(0, 0, false));
        a
    });
}

#[test]
fn grid_when_the_query_fails() {
    snapshot("grid_error", || {
        let mut a = app_with_tables(&order_tables());
        type_command(&mut a, "table Orders");
        let (job, _, _) = only_query(&mut a);
        a.update(Event::Job(
            job,
            JobOutput::Page {
                result: Err("The table does not exist. (HTTP 404 TableNotFound)".into()),
                scanned: 0,
            },
        ));
        a
    });
}

#[test]
fn grid_scrolled_to_the_last_column_keeps_the_keys_pinned() {
    snapshot("grid_far_column", || {
        let mut a = app_with_tables(&order_tables());
        open_with_page(
            &mut a,
            "Orders",
            EntityPage {
                entities: typed_rows(),
                continuation: None,
            },
        );
        for _ in 0..20 {
            press_char(&mut a, 'l');
        }
        a
    });
}

#[test]
fn grid_with_a_client_side_search() {
    snapshot("grid_search", || {
        let mut a = app_with_tables(&order_tables());
        open_with_page(
            &mut a,
            "Orders",
            EntityPage {
                entities: typed_rows(),
                continuation: None,
            },
        );
        press_char(&mut a, '/');
        type_text(&mut a, "us");
        press(&mut a, KeyCode::Enter);
        a
    });
}

#[test]
fn grid_with_marked_rows() {
    snapshot("grid_marked", || {
        let mut a = app_with_tables(&order_tables());
        open_with_page(&mut a, "Orders", page(0, 10, false));
        press_char(&mut a, ' ');
        press_char(&mut a, 'j');
        press_char(&mut a, ' ');
        a
    });
}

// ---- entity view and overlays -----------------------------------------------------------

#[test]
fn entity_view_with_a_multi_line_string() {
    snapshot("entity_view", || {
        let mut a = app_with_tables(&order_tables());
        open_with_page(
            &mut a,
            "Orders",
            EntityPage {
                entities: typed_rows(),
                continuation: None,
            },
        );
        press_char(&mut a, 'j');
        press_char(&mut a, 'j');
        press(&mut a, KeyCode::Enter);
        a
    });
}

#[test]
fn entity_view_of_every_type() {
    snapshot("entity_view_types", || {
        let mut a = app_with_tables(&order_tables());
        open_with_page(
            &mut a,
            "Orders",
            EntityPage {
                entities: typed_rows(),
                continuation: None,
            },
        );
        press(&mut a, KeyCode::Enter);
        a
    });
}

#[test]
fn help_overlay_lists_the_live_bindings() {
    snapshot("help", || {
        let mut a = app_with_tables(&order_tables());
        press_char(&mut a, '?');
        a
    });
}

#[test]
fn command_line_with_an_error() {
    snapshot("command_error", || {
        let mut a = app_with_tables(&order_tables());
        type_command(&mut a, "frobnicate");
        a
    });
}

#[test]
fn filter_bar_with_a_filter_error() {
    snapshot("filter_bar_error", || {
        let mut a = app_with_tables(&order_tables());
        open_with_page(&mut a, "Orders", page(0, 30, true));
        press_char(&mut a, 'f');
        type_text(&mut a, "PartitionKey eq 'EU");
        press(&mut a, KeyCode::Enter);
        a
    });
}

#[test]
fn create_table_dialog_with_a_validation_error() {
    snapshot("create_table_error", || {
        let mut a = app_with_tables(&order_tables());
        press_char(&mut a, 'i');
        type_text(&mut a, "1bad-name");
        press(&mut a, KeyCode::Enter);
        a
    });
}

#[test]
fn delete_table_confirmation_while_the_name_is_typed() {
    snapshot("delete_table_confirm", || {
        let mut a = app_with_tables(&order_tables());
        // Cursor: the source, then Audit, Customers, OrderLines, Orders.
        for _ in 0..4 {
            press_char(&mut a, 'j');
        }
        press_char(&mut a, 'd');
        type_text(&mut a, "Ord");
        a
    });
}
