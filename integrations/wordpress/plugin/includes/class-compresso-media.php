<?php
/**
 * The media library: a "Compresso" column in the list view (what was saved, the WebP/AVIF copies, a
 * warning when a backup is missing or damaged), the same summary with "Compress now" and "Restore
 * original" in the attachment details (media modal and edit screen), and as row actions.
 *
 * The actions are links to admin-post.php with a nonce per action and attachment; the handler checks
 * the nonce and that the user can edit that attachment, then goes back where the user was with a notice.
 * "Compress now" queues the attachment for the background job (as an upload does), so a large image
 * never runs into the request's time limit; "Restore original" runs at once.
 *
 * @package Compresso
 */

if ( ! defined( 'ABSPATH' ) ) {
	exit;
}

/**
 * Media-library screens.
 */
class Compresso_Media {

	const COLUMN = 'compresso';

	/**
	 * manage_media_columns.
	 *
	 * @param array $columns The list table's columns.
	 * @return array
	 */
	public static function add_column( $columns ) {
		$columns[ self::COLUMN ] = __( 'Compresso', 'compresso' );
		return $columns;
	}

	/**
	 * manage_media_custom_column.
	 *
	 * @param string $column        The column.
	 * @param int    $attachment_id The row's attachment.
	 */
	public static function render_column( $column, $attachment_id ) {
		if ( self::COLUMN !== $column ) {
			return;
		}
		echo self::summary_html( (int) $attachment_id, true ); // phpcs:ignore WordPress.Security.EscapeOutput.OutputNotEscaped -- built from escaped parts.
	}

	/**
	 * media_row_actions: "Compress now" / "Restore original" under the file name.
	 *
	 * @param array   $actions The row's actions.
	 * @param WP_Post $post    The attachment.
	 * @return array
	 */
	public static function row_actions( $actions, $post ) {
		if ( ! $post || ! self::supported( $post->ID ) || ! current_user_can( 'edit_post', $post->ID ) ) {
			return $actions;
		}
		foreach ( self::links( $post->ID ) as $action => $link ) {
			$actions[ 'compresso_' . $action ] = $link;
		}
		return $actions;
	}

	/**
	 * attachment_fields_to_edit: the summary and the buttons in the attachment details.
	 *
	 * @param array   $fields The fields.
	 * @param WP_Post $post   The attachment.
	 * @return array
	 */
	public static function attachment_fields( $fields, $post ) {
		if ( ! $post || ! self::supported( $post->ID ) ) {
			return $fields;
		}
		$html = self::summary_html( $post->ID, false );
		if ( current_user_can( 'edit_post', $post->ID ) ) {
			$buttons = array();
			foreach ( self::links( $post->ID, 'button' ) as $link ) {
				$buttons[] = $link;
			}
			$html .= $buttons ? '<p class="compresso-actions">' . implode( ' ', $buttons ) . '</p>' : '';
		}
		$fields['compresso'] = array(
			'label' => __( 'Compresso', 'compresso' ),
			'input' => 'html',
			'html'  => '<div class="compresso-details">' . $html . '</div>',
		);
		return $fields;
	}

	/**
	 * @return bool Whether the attachment is an image the plugin handles.
	 */
	private static function supported( $attachment_id ) {
		return in_array( get_post_mime_type( $attachment_id ), Compresso_Optimizer::MIME_TYPES, true );
	}

	/**
	 * The action links for an attachment, in its state.
	 *
	 * @param int    $attachment_id The attachment.
	 * @param string $class         'button' for buttons, '' for row-action links.
	 * @return array action => <a> tag.
	 */
	public static function links( $attachment_id, $class = '' ) {
		$state   = Compresso_Optimizer::state( $attachment_id );
		$links   = array();
		$attr    = '' !== $class ? ' class="' . esc_attr( $class ) . '"' : '';
		$restore = self::has_backup( $state );
		if ( compresso_is_connected() && ! in_array( $state['status'], array( 'queued', 'waiting' ), true ) ) {
			$label            = 'error' === $state['status'] ? __( 'Try again', 'compresso' ) : ( 'done' === $state['status'] ? __( 'Compress again', 'compresso' ) : __( 'Compress now', 'compresso' ) );
			$links['compress'] = sprintf( '<a href="%1$s"%2$s>%3$s</a>', esc_url( self::action_url( 'compress', $attachment_id ) ), $attr, esc_html( $label ) );
		}
		if ( $restore ) {
			$links['restore'] = sprintf( '<a href="%1$s"%2$s>%3$s</a>', esc_url( self::action_url( 'restore', $attachment_id ) ), $attr, esc_html__( 'Restore original', 'compresso' ) );
		}
		return $links;
	}

	/**
	 * @return string admin-post.php URL of an action, with its nonce and the page to go back to.
	 */
	public static function action_url( $action, $attachment_id ) {
		return wp_nonce_url(
			add_query_arg(
				array(
					'action'        => 'compresso_' . $action,
					'attachment_id' => (int) $attachment_id,
				),
				admin_url( 'admin-post.php' )
			),
			'compresso_' . $action . '_' . (int) $attachment_id
		);
	}

	/**
	 * @return bool Whether the record has anything a restore would put back.
	 */
	private static function has_backup( array $state ) {
		if ( ! empty( $state['png_to_jpeg']['converted'] ) ) {
			return true;
		}
		foreach ( $state['files'] as $record ) {
			if ( ! empty( $record['original_sha256'] ) ) {
				return true;
			}
		}
		return false;
	}

	/**
	 * The summary a site owner reads: what was saved, the copies made, what went wrong.
	 *
	 * @param int  $attachment_id The attachment.
	 * @param bool $short         The list column (shorter) or the details.
	 * @return string HTML.
	 */
	public static function summary_html( $attachment_id, $short ) {
		if ( ! self::supported( $attachment_id ) ) {
			return '<span class="compresso-status compresso-status-unsupported">' . esc_html__( 'Not an image Compresso handles.', 'compresso' ) . '</span>';
		}
		$state = Compresso_Optimizer::state( $attachment_id );
		$out   = array();
		switch ( $state['status'] ) {
			case 'queued':
				$out[] = '<span class="compresso-status compresso-status-queued">' . esc_html__( 'Waiting to be compressed (in the background).', 'compresso' ) . '</span>';
				break;
			case 'waiting':
				$out[] = '<span class="compresso-status compresso-status-waiting">' . esc_html__( 'The plan\'s requests for today are used up; it will be compressed after the reset.', 'compresso' ) . '</span>';
				break;
			case 'error':
				$out[] = '<span class="compresso-status compresso-status-error">' . esc_html(
					sprintf(
						/* translators: 1: message, 2: error code */
						__( 'Not compressed: %1$s (%2$s).', 'compresso' ),
						isset( $state['error']['message'] ) ? $state['error']['message'] : '',
						isset( $state['error']['code'] ) ? $state['error']['code'] : ''
					)
				) . '</span>';
				break;
			case 'done':
				break;
			default:
				$out[] = '<span class="compresso-status compresso-status-new">' . esc_html__( 'Not compressed yet.', 'compresso' ) . '</span>';
		}
		$before = 0;
		$after  = 0;
		$counts = array(
			'webp' => 0,
			'avif' => 0,
		);
		foreach ( $state['files'] as $record ) {
			$before += isset( $record['size_before'] ) ? (int) $record['size_before'] : 0;
			$after  += isset( $record['size_after'] ) ? (int) $record['size_after'] : 0;
			foreach ( array_keys( $counts ) as $format ) {
				if ( ! empty( $record['siblings'][ $format ] ) ) {
					++$counts[ $format ];
				}
			}
		}
		if ( $before > 0 ) {
			$percent = round( ( 1 - $after / $before ) * 100, 1 );
			$out[]   = '<span class="compresso-saving">' . esc_html(
				sprintf(
					/* translators: 1: percent saved, 2: size before, 3: size after, 4: number of files */
					_n( 'Saved %1$s%% (%2$s → %3$s), %4$d file.', 'Saved %1$s%% (%2$s → %3$s) over %4$d files.', count( $state['files'] ), 'compresso' ),
					number_format_i18n( $percent, 1 ),
					size_format( $before, 1 ),
					size_format( $after, 1 ),
					count( $state['files'] )
				)
			) . '</span>';
			$formats = array();
			foreach ( $counts as $format => $count ) {
				if ( $count > 0 ) {
					/* translators: 1: format, 2: copies made, 3: files (the original and its generated sizes) */
					$formats[] = sprintf( _n( '%1$s: %2$d of %3$d file', '%1$s: %2$d of %3$d files', count( $state['files'] ), 'compresso' ), strtoupper( $format ), $count, count( $state['files'] ) );
				}
			}
			$out[] = '<span class="compresso-formats">' . esc_html( $formats ? implode( ' · ', $formats ) : __( 'No WebP/AVIF copies.', 'compresso' ) ) . '</span>';
		}
		if ( ! empty( $state['png_to_jpeg']['converted'] ) ) {
			$out[] = '<span class="compresso-converted">' . esc_html(
				sprintf(
					/* translators: %s: percent saved */
					__( 'Converted from PNG to JPEG (%s%% smaller); restoring brings the PNG back.', 'compresso' ),
					number_format_i18n( (float) $state['png_to_jpeg']['saving'], 1 )
				)
			) . '</span>';
		}
		foreach ( Compresso_Backups::problems( $attachment_id ) as $name => $problem ) {
			$message = 'missing' === $problem
				/* translators: %s: file name */
				? __( 'Backup of %s is missing: this file cannot be restored.', 'compresso' )
				/* translators: %s: file name */
				: __( 'Backup of %s is damaged (its checksum does not match): this file cannot be restored.', 'compresso' );
			$out[]   = '<span class="compresso-backup-warning compresso-backup-' . esc_attr( $problem ) . '">' . esc_html( sprintf( $message, $name ) ) . '</span>';
			if ( $short ) {
				break;
			}
		}
		return implode( '<br />', $out );
	}

	/**
	 * admin-post.php?action=compresso_compress.
	 */
	public static function handle_compress() {
		$id = self::checked_request( 'compress' );
		Compresso_Optimizer::queue( $id, 'manual' );
		self::back( 'queued' );
	}

	/**
	 * admin-post.php?action=compresso_restore.
	 */
	public static function handle_restore() {
		$id     = self::checked_request( 'restore' );
		$result = Compresso_Optimizer::restore( $id );
		self::back( is_wp_error( $result ) ? $result->get_error_code() : 'restored' );
	}

	/**
	 * Nonce and capability of a request for an action; dies with 403 when either fails.
	 *
	 * @return int The attachment.
	 */
	private static function checked_request( $action ) {
		$id = isset( $_GET['attachment_id'] ) ? absint( $_GET['attachment_id'] ) : 0; // phpcs:ignore WordPress.Security.NonceVerification.Recommended -- checked just below.
		if ( ! $id || 'attachment' !== get_post_type( $id ) || ! current_user_can( 'edit_post', $id ) ) {
			wp_die( esc_html__( 'You are not allowed to change this image.', 'compresso' ), '', array( 'response' => 403 ) );
		}
		check_admin_referer( 'compresso_' . $action . '_' . $id );
		return $id;
	}

	/**
	 * Back to the page the user came from, with the result for the notice.
	 */
	private static function back( $result ) {
		$to = wp_get_referer();
		if ( ! $to ) {
			$to = admin_url( 'upload.php?mode=list' );
		}
		wp_safe_redirect( add_query_arg( 'compresso_result', rawurlencode( $result ), remove_query_arg( 'compresso_result', $to ) ) );
		exit;
	}

	/**
	 * admin_notices: the result of the last action.
	 */
	public static function result_notice() {
		if ( empty( $_GET['compresso_result'] ) ) { // phpcs:ignore WordPress.Security.NonceVerification.Recommended -- only shows a message.
			return;
		}
		$result   = sanitize_key( wp_unslash( $_GET['compresso_result'] ) ); // phpcs:ignore WordPress.Security.NonceVerification.Recommended
		$messages = array(
			'queued'   => array( 'info', __( 'The image is being compressed in the background. The Compresso column shows the result when it is done.', 'compresso' ) ),
			'restored' => array( 'success', __( 'The original image was restored, byte for byte; its WebP/AVIF copies were removed.', 'compresso' ) ),
		);
		$notice   = isset( $messages[ $result ] ) ? $messages[ $result ] : array(
			'error',
			/* translators: %s: error code */
			sprintf( __( 'The original could not be restored (%s). Nothing else was changed; the Compresso column tells which backup is missing or damaged.', 'compresso' ), $result ),
		);
		printf( '<div class="notice notice-%1$s is-dismissible compresso-result"><p>%2$s</p></div>', esc_attr( $notice[0] ), esc_html( $notice[1] ) );
	}
}
